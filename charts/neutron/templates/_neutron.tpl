{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "neutron.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "NEUTRON_DB_PASSWORD" "secret" "neutron-db" "key" "password")
      (dict "name" "NEUTRON_KEYSTONE_PASSWORD" "secret" "neutron-keystone" "key" "password")
      (dict "name" "NEUTRON_MEMCACHE_SECRET_KEY" "secret" "neutron-keystone" "key" "memcache-secret-key")
      (dict "name" "NOVA_KEYSTONE_PASSWORD" "secret" "nova-keystone" "key" "password")
      (dict "name" "NEUTRON_RABBITMQ_PASSWORD" "secret" "neutron-rabbitmq" "key" "password")
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

{{/*
Init container of neutron-server: waits until the neutron database holds the expand and
contract heads of the image's migrations (neutron ships them as EXPAND_HEAD and
CONTRACT_HEAD), i.e. until the neutron-init Job's `upgrade heads` is done, instead of
crash-looping on missing tables while the Job runs (the kubelet's back-off then delays
the server for minutes after it). One check is files/wait_db.py.
*/}}
{{- define "neutron.waitDBStep" -}}
{{- $check := .ctx.Files.Get "files/wait_db.py" -}}
{{- if contains "'" $check -}}
{{- fail "neutron: files/wait_db.py holds a single quote (it goes inside single quotes of sh)" -}}
{{- end -}}
{{- $script := printf "i=0\nuntil python3 -c '%s'; do\n  i=$((i+1)); [ \"$i\" -lt 360 ] || exit 1\n  sleep 5\ndone\n" $check -}}
{{- include "osd-lib.commandStep" (merge (dict "name" "wait-db" "files" (dict "neutron.conf" "/etc/neutron/neutron.conf") "command" (list "/bin/sh" "-ec" $script)) .) -}}
{{- end -}}
