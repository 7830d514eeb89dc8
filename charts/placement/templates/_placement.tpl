{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "placement.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "PLACEMENT_DB_PASSWORD" "secret" "placement-db" "key" "password")
      (dict "name" "PLACEMENT_KEYSTONE_PASSWORD" "secret" "placement-keystone" "key" "password")
      (dict "name" "PLACEMENT_MEMCACHE_SECRET_KEY" "secret" "placement-keystone" "key" "memcache-secret-key") -}}
{{- toJson (dict "image" "openstack" "configSecret" "placement-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{- define "placement.configFiles" -}}
{{- toJson (dict "placement.conf" .Values.conf.placement "uwsgi.ini" .Values.conf.uwsgi) -}}
{{- end -}}
