{{/* Secret-backed variables of each component: (dict "name" "key" "secret"). */}}
{{- define "ceph.env.fsid" -}}
{{- toJson (list (dict "name" "FSID" "secret" "ceph-cluster" "key" "fsid")) -}}
{{- end -}}

{{- define "ceph.env.admin" -}}
{{- toJson (list (dict "name" "ADMIN_KEY" "secret" "ceph-cluster" "key" "admin-key")) -}}
{{- end -}}

{{/* The client keys the setup Job imports: CLIENT_<NAME>_KEY from Secret ceph-client-<name>. */}}
{{- define "ceph.env.clients" -}}
{{- $out := list -}}
{{- range $name, $_ := .Values.clients -}}
{{- $out = append $out (dict "name" (include "ceph.clientVar" $name) "secret" (printf "ceph-client-%s" $name) "key" "key") -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- define "ceph.clientVar" -}}
{{- printf "CLIENT_%s_KEY" (. | replace "-" "_" | upper) -}}
{{- end -}}

{{/*
Config files (all in Secret ceph-config; each pod resolves only the placeholders of the
keys it is given, the others stay placeholders):
  ceph.conf        conf.ceph plus the OSD's block size
  admin.keyring    client.admin (monitor, OSD and setup pods: the ceph CLI)
  mkfs.keyring     mon., client.admin and mgr.x with their capabilities (monitor mkfs)
  mgr.keyring      mgr.x
  clients.keyring  every client with its key and capabilities (setup Job: ceph auth import)
*/}}
{{- define "ceph.configFiles" -}}
{{- $conf := deepCopy .Values.conf.ceph -}}
{{- $osd := merge (dict "bluestore_block_size" (.Values.osd.blockSizeBytes | int64)) ($conf.osd | default dict) -}}
{{- $_ := set $conf "osd" $osd -}}
{{- $admin := dict "key" "@@ADMIN_KEY@@" "caps mon" ("allow *" | quote) "caps osd" ("allow *" | quote) "caps mgr" ("allow *" | quote) "caps mds" ("allow *" | quote) -}}
{{- $mkfs := dict "mon." (dict "key" "@@MON_KEY@@" "caps mon" ("allow *" | quote))
      "client.admin" $admin
      "mgr.x" (dict "key" "@@MGR_KEY@@" "caps mon" ("allow profile mgr" | quote) "caps osd" ("allow *" | quote) "caps mds" ("allow *" | quote)) -}}
{{- $clients := dict -}}
{{- range $name, $caps := .Values.clients -}}
{{- $entry := dict "key" (printf "@@%s@@" (include "ceph.clientVar" $name)) -}}
{{- range $svc, $cap := $caps -}}
{{- $_ := set $entry (printf "caps %s" $svc) ($cap | quote) -}}
{{- end -}}
{{- $_ := set $clients (printf "client.%s" $name) $entry -}}
{{- end -}}
{{- toJson (dict "ceph.conf" $conf "admin.keyring" (dict "client.admin" (dict "key" "@@ADMIN_KEY@@")) "mkfs.keyring" $mkfs
      "mgr.keyring" (dict "mgr.x" (dict "key" "@@MGR_KEY@@")) "clients.keyring" $clients) -}}
{{- end -}}

{{- define "ceph.checksum" -}}
{{- include "osd-lib.configChecksum" (dict "ctx" . "files" (include "ceph.configFiles" . | fromJson)) -}}
{{- end -}}

{{/*
config-render with the node's address (MY_IP, status.hostIP) besides the Secret variables:
(dict "ctx" $ "secretEnv" (list ...)).
*/}}
{{- define "ceph.configRender" -}}
{{- $field := dict "name" "MY_IP" -}}
{{- $args := dict "ctx" .ctx "image" "ceph" "configSecret" "ceph-config" "secretEnv" (append .secretEnv $field) -}}
{{- $step := index (include "osd-lib.configRender" $args | fromYamlArray) 0 -}}
{{- $env := include "osd-lib.secretEnv" .secretEnv | fromYamlArray -}}
{{- $env = append $env (dict "name" "MY_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.hostIP"))) -}}
{{- $_ := set $step "env" $env -}}
{{- toYaml (list $step) -}}
{{- end -}}

{{/* Where the daemons run: the one node holding their data. */}}
{{- define "ceph.placement" -}}
nodeSelector:
  {{- if .Values.node }}
  kubernetes.io/hostname: {{ .Values.node | quote }}
  {{- else }}
  {{- toYaml .Values.nodeSelector | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* Mounts every pod has: the rendered config files at Ceph's paths, the admin socket dir. */}}
{{- define "ceph.configMounts" -}}
- name: config
  mountPath: /etc/ceph/ceph.conf
  subPath: ceph.conf
  readOnly: true
- name: run
  mountPath: /run/ceph
{{- range .keyrings }}
- name: config
  mountPath: /etc/ceph/{{ .path }}
  subPath: {{ .file }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* Init container that waits for the monitor with the admin key (ceph status). */}}
{{- define "ceph.waitMonScript" -}}
i=0
until ceph --connect-timeout 5 status >/dev/null 2>&1; do
  i=$((i+1)); [ "$i" -lt 150 ] || { echo "the ceph monitor at $MY_IP does not answer"; ceph --connect-timeout 5 status; exit 1; }
  sleep 2
done
{{- end -}}

{{/*
A daemon Deployment: (dict "ctx" $ "component" "mon" "secretEnv" (list ...) "env" (list ...)
"script" "..." "keyrings" (list (dict "file" "admin.keyring" "path" "ceph.client.admin.keyring"))
"hostDirs" (list (dict "name" "mon" "sub" "mon-a" "path" "/var/lib/ceph/mon/ceph-a")) and either
"probes" (dict for osd-lib.probes: startup, readiness and liveness) or "readiness" (a probe)).
Host network (the monitor's address is the node's; OSDs and the host's QEMU reach each
other there), Recreate (ports and data cannot be shared by two pods), the ceph user.
*/}}
{{- define "ceph.daemon" -}}
{{- $ctx := .ctx -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ceph-{{ .component }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- include "osd-lib.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "osd-lib.labels" (dict "ctx" $ctx "component" .component) | nindent 8 }}
      annotations:
        checksum/config: {{ include "ceph.checksum" $ctx }}
    spec:
      enableServiceLinks: false
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      terminationGracePeriodSeconds: 30
      {{- include "ceph.placement" $ctx | nindent 6 }}
      {{- include "osd-lib.podSecurity" (dict "uid" $ctx.Values.uid) | nindent 6 }}
      initContainers:
        {{- range .hostDirs }}
        {{- include "osd-lib.chownStep" (dict "ctx" $ctx "image" "ceph" "uid" $ctx.Values.uid "volume" .name "path" .path) | nindent 8 }}
        {{- end }}
        {{- include "ceph.configRender" (dict "ctx" $ctx "secretEnv" .secretEnv) | nindent 8 }}
      containers:
        - name: ceph-{{ .component }}
          image: {{ include "osd-lib.image" (dict "ctx" $ctx "image" "ceph") }}
          imagePullPolicy: Never
          command:
            - /bin/bash
            - -ec
            - |
              {{- .script | nindent 14 }}
          env:
            - name: MY_IP
              valueFrom: {fieldRef: {fieldPath: status.hostIP}}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with .probes }}
          {{- include "osd-lib.probes" . | nindent 10 }}
          {{- end }}
          {{- with .readiness }}
          readinessProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- include "osd-lib.resources" (dict "ctx" $ctx "component" .component) | nindent 10 }}
          volumeMounts:
            {{- include "ceph.configMounts" . | nindent 12 }}
            - name: tmp
              mountPath: /tmp
            {{- range .hostDirs }}
            - name: {{ .name }}
              mountPath: {{ .path }}
            {{- end }}
      volumes:
        {{- include "osd-lib.configVolumes" (dict "configSecret" "ceph-config") | nindent 8 }}
        - name: run
          emptyDir: {medium: Memory}
        - name: tmp
          emptyDir: {}
        {{- range .hostDirs }}
        - name: {{ .name }}
          hostPath:
            path: {{ printf "%s/%s" $ctx.Values.persistence.hostPath .sub }}
            type: DirectoryOrCreate
        {{- end }}
{{- end -}}
