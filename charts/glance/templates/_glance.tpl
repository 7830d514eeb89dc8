{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "glance.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "GLANCE_DB_PASSWORD" "secret" "glance-db" "key" "password")
      (dict "name" "GLANCE_KEYSTONE_PASSWORD" "secret" "glance-keystone" "key" "password") -}}
{{- toJson (dict "image" "openstack" "configSecret" "glance-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{- define "glance.configFiles" -}}
{{- toJson (dict "glance-api.conf" .Values.conf.glance) -}}
{{- end -}}
