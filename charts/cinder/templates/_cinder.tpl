{{/* The backend: features.storage, ceph or lvm. */}}
{{- define "cinder.backend" -}}
{{- $b := (.Values.features | default dict).storage | default "" -}}
{{- if not (has $b (list "ceph" "lvm")) -}}
{{- fail (printf "values: features.storage %q: cinder needs the ceph or lvm backend" $b) -}}
{{- end -}}
{{- if and (eq $b "ceph") (not .Values.ceph.monHost) -}}
{{- fail "values: ceph.monHost is not set (the Ceph monitor's address)" -}}
{{- end -}}
{{- $b -}}
{{- end -}}

{{/* "true" when Cinder's services share one process, cinder-server (one replica). */}}
{{- define "cinder.combined" -}}
{{- eq (int .Values.replicas) 1 -}}
{{- end -}}

{{/*
Secret-backed variables of a component ("server", "api", "scheduler", "job", "volume",
"backup"): every pod resolves cinder.conf's; volume, backup and the combined server (which
runs both) also get their Ceph keys.
*/}}
{{- define "cinder.secretEnv" -}}
{{- $b := include "cinder.backend" .ctx -}}
{{- $env := list
      (dict "name" "CINDER_DB_PASSWORD" "secret" "cinder-db" "key" "password")
      (dict "name" "CINDER_KEYSTONE_PASSWORD" "secret" "cinder-keystone" "key" "password")
      (dict "name" "CINDER_MEMCACHE_SECRET_KEY" "secret" "cinder-keystone" "key" "memcache-secret-key")
      (dict "name" "CINDER_RABBITMQ_PASSWORD" "secret" "cinder-rabbitmq" "key" "password") -}}
{{- if eq $b "ceph" -}}
{{- $env = append $env (dict "name" "LIBVIRT_SECRET_UUID" "secret" "ceph-client-cinder" "key" "libvirt-uuid") -}}
{{- if has .component (list "volume" "backup" "server") -}}
{{- $env = append $env (dict "name" "CEPH_CINDER_KEY" "secret" "ceph-client-cinder" "key" "key") -}}
{{- end -}}
{{- if has .component (list "backup" "server") -}}
{{- $env = append $env (dict "name" "CEPH_CINDER_BACKUP_KEY" "secret" "ceph-client-cinder-backup" "key" "key") -}}
{{- end -}}
{{- end -}}
{{- toJson $env -}}
{{- end -}}

{{- define "cinder.args" -}}
{{- toJson (dict "image" "openstack" "configSecret" "cinder-config" "secretEnv" (include "cinder.secretEnv" . | fromJsonArray)) -}}
{{- end -}}

{{/*
Config files: cinder.conf (conf.cinder, the backend's section, enabled_backends and the
default volume type), uwsgi.ini, and with ceph a client ceph.conf (the monitor's address)
and the keyrings of client.cinder and client.cinder-backup.
*/}}
{{- define "cinder.configFiles" -}}
{{- $b := include "cinder.backend" . -}}
{{- $conf := deepCopy .Values.conf.cinder -}}
{{- $default := merge (dict "enabled_backends" $b "default_volume_type" $b) ($conf.DEFAULT | default dict) -}}
{{- $_ := set $default "enabled_backends" $b -}}
{{- $_ := set $default "default_volume_type" $b -}}
{{- $_ := set $conf "DEFAULT" $default -}}
{{- $_ := set $conf $b (deepCopy (index .Values.conf.backends $b)) -}}
{{- $files := dict "cinder.conf" $conf "uwsgi.ini" .Values.conf.uwsgi -}}
{{- if eq $b "ceph" -}}
{{- /* os-brick's privsep daemon keeps CAP_SYS_ADMIN by default, which the non-root,
unprivileged cinder-backup container does not have: the daemon fails to start ("Failed
to drop privileges": capset EPERM) and every backup stays "creating". With RBD nothing
os-brick does for Cinder needs a capability (the backup driver reads volumes through
librbd; privsep only reads the host's ids as uid 0), so it keeps none. */ -}}
{{- $_ := set $conf "privsep_osbrick" (merge (dict "capabilities" "") (index $conf "privsep_osbrick" | default dict)) -}}
{{- $_ := set $files "ceph.conf" (dict "global" (dict "mon_host" .Values.ceph.monHost)) -}}
{{- $_ := set $files "ceph.client.cinder.keyring" (dict "client.cinder" (dict "key" "@@CEPH_CINDER_KEY@@")) -}}
{{- $_ := set $files "ceph.client.cinder-backup.keyring" (dict "client.cinder-backup" (dict "key" "@@CEPH_CINDER_BACKUP_KEY@@")) -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{- define "cinder.checksum" -}}
{{- include "osd-lib.configChecksum" (dict "ctx" . "files" (include "cinder.configFiles" . | fromJson)) -}}
{{- end -}}

{{/* The config files a component mounts, file -> path. */}}
{{- define "cinder.mounts" -}}
{{- $b := include "cinder.backend" .ctx -}}
{{- $m := dict "cinder.conf" "/etc/cinder/cinder.conf" -}}
{{- if eq .component "api" -}}
{{- $_ := set $m "uwsgi.ini" "/etc/cinder/uwsgi-osd.ini" -}}
{{- end -}}
{{- if and (eq $b "ceph") (has .component (list "volume" "backup" "server")) -}}
{{- $_ := set $m "ceph.conf" "/etc/ceph/ceph.conf" -}}
{{- $_ := set $m "ceph.client.cinder.keyring" "/etc/ceph/ceph.client.cinder.keyring" -}}
{{- if has .component (list "backup" "server") -}}
{{- $_ := set $m "ceph.client.cinder-backup.keyring" "/etc/ceph/ceph.client.cinder-backup.keyring" -}}
{{- end -}}
{{- end -}}
{{- toJson $m -}}
{{- end -}}

{{/*
Init container of the long-running pods: waits until the database is at the image's
alembic head (the init Job's db sync) instead of crash-looping on missing tables; one
process polling with SQLAlchemy (osd-lib.waitDBStep), not an interpreter importing Cinder
every 5 s.
*/}}
{{- define "cinder.waitDBStep" -}}
{{- include "osd-lib.waitDBStep" (merge (dict "file" "cinder.conf" "conf" "/etc/cinder/cinder.conf" "section" "database" "schema" "alembic:cinder/db/migrations" "job" "cinder-init") .) -}}
{{- end -}}

{{/*
config-render, with MY_IP (status.hostIP) besides the Secret variables when cinder.conf
names the node's address (lvm: the iSCSI target address).
*/}}
{{- define "cinder.configRender" -}}
{{- if .myIP -}}
{{- $step := index (include "osd-lib.configRender" (merge (dict "secretEnv" (append .secretEnv (dict "name" "MY_IP"))) .) | fromYamlArray) 0 -}}
{{- $env := include "osd-lib.secretEnv" .secretEnv | fromYamlArray -}}
{{- $env = append $env (dict "name" "MY_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.hostIP"))) -}}
{{- $_ := set $step "env" $env -}}
{{- toYaml (list $step) -}}
{{- else -}}
{{- include "osd-lib.configRender" . -}}
{{- end -}}
{{- end -}}

{{/*
A long-running Deployment (osd-lib.workload): (dict "ctx" $ "component" "scheduler"
"command" (list ...) "replicas" N "ports" (list ...) "probes" (dict ...) "root" bool
"hostNetwork" bool "hostPaths" (list (dict "name" "path" "type")) "nodeSelector" (dict ...)).
Without a nodeSelector on the control role's nodes (osd-lib.controlPlane); one replica is
replaced by Recreate.
*/}}
{{- define "cinder.deployment" -}}
{{- $ctx := .ctx -}}
{{- $args := merge (dict "ctx" $ctx) (include "cinder.args" (dict "ctx" $ctx "component" .component) | fromJson) -}}
{{- $mounts := list (dict "name" "state" "mountPath" "/var/lib/cinder") -}}
{{- $volumes := append (include "osd-lib.configVolumes" $args | fromYamlArray) (dict "name" "state" "emptyDir" dict) -}}
{{- range .hostPaths -}}
{{- $m := dict "name" .name "mountPath" .path -}}
{{- if .readOnly -}}
{{- $_ := set $m "readOnly" true -}}
{{- end -}}
{{- $mounts = append $mounts $m -}}
{{- $volumes = append $volumes (dict "name" .name "hostPath" (dict "path" .path "type" .type)) -}}
{{- end -}}
{{- $main := dict "name" (printf "cinder-%s" .component) "command" .command "ports" .ports "probes" .probes
      "resources" .component "files" (include "cinder.mounts" (dict "ctx" $ctx "component" .component) | fromJson) "mounts" $mounts -}}
{{- $w := dict "ctx" $ctx "name" (printf "cinder-%s" .component) "component" .component "replicas" (.replicas | default 1)
      "strategy" (dict "type" (ternary "RollingUpdate" "Recreate" (ne (.replicas | default 1 | int) 1)))
      "checksum" (include "cinder.checksum" $ctx) "hostNetwork" .hostNetwork "nodeSelector" .nodeSelector "uid" $ctx.Values.uid -}}
{{- if .root -}}
{{- $_ := set $main "securityContext" (dict "privileged" true) -}}
{{- $_ := set $w "securityContext" (dict "runAsUser" 0 "runAsGroup" 0 "runAsNonRoot" false) -}}
{{- end -}}
{{- $init := include "cinder.configRender" (merge (dict "myIP" (eq (include "cinder.backend" $ctx) "lvm")) $args) | fromYamlArray -}}
{{- $init = concat $init (include "cinder.waitDBStep" $args | fromYamlArray) -}}
{{- include "osd-lib.workload" (merge (dict "initContainers" $init "containers" (include "osd-lib.container" (merge $main $args) | fromYamlArray) "volumes" $volumes) $w) -}}
{{- end -}}
