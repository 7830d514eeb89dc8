{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "keystone.stepArgs" -}}
{{- $secretEnv := list (dict "name" "DB_PASSWORD" "secret" "keystone-db" "key" "password") -}}
{{- toJson (dict "image" "openstack" "configSecret" "keystone-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{- define "keystone.configFiles" -}}
{{- toJson (dict "keystone.conf" .Values.conf.keystone "uwsgi.ini" .Values.conf.uwsgi) -}}
{{- end -}}
