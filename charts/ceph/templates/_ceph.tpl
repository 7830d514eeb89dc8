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
{{- $init := list -}}
{{- $mounts := concat (include "ceph.configMounts" . | fromYamlArray) (list (dict "name" "tmp" "mountPath" "/tmp")) -}}
{{- $volumes := concat (include "osd-lib.configVolumes" (dict "configSecret" "ceph-config") | fromYamlArray)
      (list (dict "name" "run" "emptyDir" (dict "medium" "Memory")) (dict "name" "tmp" "emptyDir" dict)) -}}
{{- range .hostDirs }}
{{- $init = concat $init (include "osd-lib.chownStep" (dict "ctx" $ctx "image" "ceph" "uid" $ctx.Values.uid "volume" .name "path" .path) | fromYamlArray) -}}
{{- $mounts = append $mounts (dict "name" .name "mountPath" .path) -}}
{{- $volumes = append $volumes (dict "name" .name "hostPath" (dict "path" (printf "%s/%s" $ctx.Values.persistence.hostPath .sub) "type" "DirectoryOrCreate")) -}}
{{- end }}
{{- $init = concat $init (include "ceph.configRender" (dict "ctx" $ctx "secretEnv" .secretEnv) | fromYamlArray) -}}
{{- $container := include "osd-lib.container" (dict "ctx" $ctx "image" "ceph" "name" (printf "ceph-%s" .component)
      "command" (list "/bin/bash" "-ec" (printf "%s\n" .script))
      "env" (concat (list (dict "name" "MY_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.hostIP")))) (.env | default list))
      "probes" .probes "probeSpec" (ternary (dict "readinessProbe" .readiness) dict (not (empty .readiness)))
      "resources" .component "mounts" $mounts) | fromYamlArray -}}
{{ include "osd-lib.workload" (dict "ctx" $ctx "name" (printf "ceph-%s" .component) "component" .component "uid" $ctx.Values.uid
    "replicas" 1 "strategy" (dict "type" "Recreate") "hostNetwork" true
    "checksum" (include "ceph.checksum" $ctx)
    "nodeSelector" ((include "ceph.placement" $ctx | fromYaml).nodeSelector | default "none")
    "pod" (dict "terminationGracePeriodSeconds" 30)
    "initContainers" $init "containers" $container "volumes" $volumes) }}
{{- end -}}
