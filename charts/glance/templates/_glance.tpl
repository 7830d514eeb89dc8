{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "glance.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "GLANCE_DB_PASSWORD" "secret" "glance-db" "key" "password")
      (dict "name" "GLANCE_KEYSTONE_PASSWORD" "secret" "glance-keystone" "key" "password")
      (dict "name" "GLANCE_MEMCACHE_SECRET_KEY" "secret" "glance-keystone" "key" "memcache-secret-key") -}}
{{- if eq (include "glance.storage" .) "ceph" -}}
{{- $secretEnv = append $secretEnv (dict "name" "CEPH_GLANCE_KEY" "secret" "ceph-client-glance" "key" "key") -}}
{{- end -}}
{{- toJson (dict "image" "openstack" "configSecret" "glance-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{/* The storage backend (features.storage; "" when the controller set none). */}}
{{- define "glance.storage" -}}
{{- ((.Values.features | default dict).storage | default "") -}}
{{- end -}}

{{/*
glance-api.conf; with Ceph conf.glanceCeph merged over it, a client ceph.conf (the
monitor's address) and client.glance's keyring.
*/}}
{{- define "glance.configFiles" -}}
{{- if eq (include "glance.storage" .) "ceph" -}}
{{- if not .Values.ceph.monHost -}}
{{- fail "values: ceph.monHost is not set (the Ceph monitor's address)" -}}
{{- end -}}
{{- toJson (dict "glance-api.conf" (mergeOverwrite (deepCopy .Values.conf.glance) (deepCopy .Values.conf.glanceCeph))
      "ceph.conf" (dict "global" (dict "mon_host" .Values.ceph.monHost))
      "ceph.client.glance.keyring" (dict "client.glance" (dict "key" "@@CEPH_GLANCE_KEY@@"))) -}}
{{- else -}}
{{- toJson (dict "glance-api.conf" .Values.conf.glance) -}}
{{- end -}}
{{- end -}}
