{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "neutron.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "NEUTRON_DB_PASSWORD" "secret" "neutron-db" "key" "password")
      (dict "name" "NEUTRON_KEYSTONE_PASSWORD" "secret" "neutron-keystone" "key" "password")
      (dict "name" "NOVA_KEYSTONE_PASSWORD" "secret" "nova-keystone" "key" "password")
      (dict "name" "RABBITMQ_PASSWORD" "secret" "rabbitmq-credentials" "key" "password")
      (dict "name" "METADATA_SECRET" "secret" "metadata-proxy" "key" "shared-secret") -}}
{{- toJson (dict "image" "openstack" "configSecret" "neutron-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{- define "neutron.configFiles" -}}
{{- toJson (dict "neutron.conf" .Values.conf.neutron "ml2_conf.ini" .Values.conf.ml2 "metadata_agent.ini" .Values.conf.metadata) -}}
{{- end -}}

{{/* The files neutron-server reads, where the package puts them. */}}
{{- define "neutron.serverFiles" -}}
{{- toJson (dict "neutron.conf" "/etc/neutron/neutron.conf" "ml2_conf.ini" "/etc/neutron/plugins/ml2/ml2_conf.ini") -}}
{{- end -}}
