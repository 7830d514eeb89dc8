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
A long-running Deployment: (dict "ctx" $ "component" "scheduler" "command" (list ...)
"replicas" N "ports" (list ...) "probes" (dict ...) "root" bool "hostNetwork" bool
"hostPaths" (list (dict "name" "path" "type")) "nodeSelector" (dict ...)).
*/}}
{{- define "cinder.deployment" -}}
{{- $ctx := .ctx -}}
{{- $args := merge (dict "ctx" $ctx) (include "cinder.args" (dict "ctx" $ctx "component" .component) | fromJson) -}}
{{- $mounts := include "cinder.mounts" (dict "ctx" $ctx "component" .component) | fromJson -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cinder-{{ .component }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
spec:
  replicas: {{ .replicas | default 1 }}
  {{- if ne (.replicas | default 1 | int) 1 }}
  strategy:
    type: RollingUpdate
  {{- else }}
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      {{- include "osd-lib.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "osd-lib.labels" (dict "ctx" $ctx "component" .component) | nindent 8 }}
      annotations:
        checksum/config: {{ include "cinder.checksum" $ctx }}
    spec:
      enableServiceLinks: false
      {{- if .hostNetwork }}
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      {{- end }}
      {{- /* The control role's nodes (osd-lib.controlPlane), or the node given (LVM's volume service). */}}
      nodeSelector:
        {{- toYaml (.nodeSelector | default (dict "node-restriction.kubernetes.io/openstack-control-plane" "enabled")) | nindent 8 }}
      {{- if .root }}
      securityContext:
        runAsUser: 0
        runAsGroup: 0
        runAsNonRoot: false
      {{- else }}
      {{- include "osd-lib.podSecurity" (dict "uid" $ctx.Values.uid) | nindent 6 }}
      {{- end }}
      initContainers:
        {{- include "cinder.configRender" (merge (dict "myIP" (eq (include "cinder.backend" $ctx) "lvm")) $args) | nindent 8 }}
        {{- include "cinder.waitDBStep" $args | nindent 8 }}
      containers:
        - name: cinder-{{ .component }}
          image: {{ include "osd-lib.image" $args }}
          imagePullPolicy: Never
          command:
            {{- toYaml .command | nindent 12 }}
          {{- if .root }}
          securityContext:
            privileged: true
          {{- end }}
          {{- with .ports }}
          ports:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .probes }}
          {{- include "osd-lib.probes" . | nindent 10 }}
          {{- end }}
          {{- include "osd-lib.resources" (dict "ctx" $ctx "component" .component) | nindent 10 }}
          volumeMounts:
            {{- include "osd-lib.configMounts" (dict "files" $mounts) | nindent 12 }}
            - name: state
              mountPath: /var/lib/cinder
            {{- range .hostPaths }}
            - name: {{ .name }}
              mountPath: {{ .path }}
              {{- if .readOnly }}
              readOnly: true
              {{- end }}
            {{- end }}
      volumes:
        {{- include "osd-lib.configVolumes" $args | nindent 8 }}
        - name: state
          emptyDir: {}
        {{- range .hostPaths }}
        - name: {{ .name }}
          hostPath:
            path: {{ .path }}
            type: {{ .type }}
        {{- end }}
{{- end -}}
