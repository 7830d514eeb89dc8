{{/* "true" when nova's api, conductor and scheduler share one process, nova-server (one replica). */}}
{{- define "nova.combined" -}}
{{- eq (int .Values.replicas) 1 -}}
{{- end -}}

{{/* The component serving the APIs: server (combined) or api. */}}
{{- define "nova.apiComponent" -}}
{{- ternary "server" "api" (eq (include "nova.combined" .) "true") -}}
{{- end -}}

{{/* Secrets of the control plane (Deployments and the init Job). */}}
{{- define "nova.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "NOVA_DB_PASSWORD" "secret" "nova-db" "key" "password")
      (dict "name" "NOVA_KEYSTONE_PASSWORD" "secret" "nova-keystone" "key" "password")
      (dict "name" "NOVA_MEMCACHE_SECRET_KEY" "secret" "nova-keystone" "key" "memcache-secret-key")
      (dict "name" "NOVA_RABBITMQ_PASSWORD" "secret" "nova-rabbitmq" "key" "password")
      (dict "name" "METADATA_SECRET" "secret" "metadata-proxy" "key" "shared-secret") -}}
{{- toJson (dict "image" "openstack" "configSecret" "nova-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{/* Secrets of nova-compute: no database, no metadata secret; with Ceph the libvirt secret's uuid. */}}
{{- define "nova.computeArgs" -}}
{{- $secretEnv := list
      (dict "name" "NOVA_KEYSTONE_PASSWORD" "secret" "nova-keystone" "key" "password")
      (dict "name" "NOVA_RABBITMQ_PASSWORD" "secret" "nova-rabbitmq" "key" "password") -}}
{{- if eq (include "nova.storage" .) "ceph" -}}
{{- $secretEnv = append $secretEnv (dict "name" "LIBVIRT_SECRET_UUID" "secret" "ceph-client-cinder" "key" "libvirt-uuid") -}}
{{- end -}}
{{- toJson (dict "image" "compute" "configSecret" "nova-compute-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{/* nova.conf of the control plane: conf.controlPlane over conf.nova. */}}
{{- define "nova.configFiles" -}}
{{- toJson (dict "nova.conf" (mergeOverwrite (deepCopy .Values.conf.nova) (deepCopy .Values.conf.controlPlane))) -}}
{{- end -}}

{{/*
nova.conf of nova-compute: conf.nova, then [libvirt] virt_type (and cpu_mode = none for
TCG) from .Values.virtType, then conf.compute.
*/}}
{{- define "nova.computeConfigFiles" -}}
{{- $virt := .Values.virtType -}}
{{- if not (has $virt (list "qemu" "kvm")) -}}
{{- fail (printf "values: virtType %q is not qemu or kvm" $virt) -}}
{{- end -}}
{{- $libvirt := dict "virt_type" $virt -}}
{{- if eq $virt "qemu" -}}
{{- $_ := set $libvirt "cpu_mode" "none" -}}
{{- end -}}
{{- $conf := mergeOverwrite (deepCopy .Values.conf.nova) (dict "libvirt" $libvirt) (deepCopy .Values.conf.compute) -}}
{{- if eq (include "nova.storage" .) "ceph" -}}
{{- $conf = mergeOverwrite $conf (deepCopy .Values.conf.computeCeph) -}}
{{- end -}}
{{- toJson (dict "nova.conf" $conf) -}}
{{- end -}}

{{/* The storage backend (features.storage; "" when the controller set none). */}}
{{- define "nova.storage" -}}
{{- ((.Values.features | default dict).storage | default "") -}}
{{- end -}}

{{/*
With Ceph: the init step of nova-compute that defines the libvirt secret the host's QEMU
opens RBD volumes with (uuid LIBVIRT_SECRET_UUID, usage ceph, private: libvirt never
hands the value out) and sets its value to client.cinder's key, read from a file in
memory so it never appears on a command line. Idempotent: define and set replace.
*/}}
{{- define "nova.libvirtSecretStep" -}}
- name: libvirt-secret
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - /bin/sh
    - -ec
    - |
      umask 077
      cat > /run/osd-secret/secret.xml <<EOF
      <secret ephemeral='no' private='yes'>
        <uuid>$LIBVIRT_SECRET_UUID</uuid>
        <usage type='ceph'><name>client.cinder (osd)</name></usage>
      </secret>
      EOF
      virsh -c qemu:///system secret-define /run/osd-secret/secret.xml
      printf '%s' "$CEPH_CINDER_KEY" > /run/osd-secret/key
      virsh -c qemu:///system secret-set-value --secret "$LIBVIRT_SECRET_UUID" --file /run/osd-secret/key
      rm -f /run/osd-secret/key
  env:
    - name: LIBVIRT_SECRET_UUID
      valueFrom:
        secretKeyRef: {name: ceph-client-cinder, key: libvirt-uuid}
    - name: CEPH_CINDER_KEY
      valueFrom:
        secretKeyRef: {name: ceph-client-cinder, key: key}
  volumeMounts:
    - name: libvirt-run
      mountPath: /run/libvirt
    - name: secret-tmp
      mountPath: /run/osd-secret
{{- end -}}

{{/*
osd-lib.dbCreateStep under another step name (the library names it db-create): the Job
creates three databases for one user. (dict ... "name" "db-create-nova-api" "database" ...).
*/}}
{{- define "nova.dbCreateStep" -}}
{{- $step := index (include "osd-lib.dbCreateStep" . | fromYamlArray) 0 -}}
{{- $_ := set $step "name" .name -}}
{{- toYaml (list $step) -}}
{{- end -}}

{{/*
The config-render step of nova-compute: osd-lib.configRender over the Secret variables plus
MY_IP and NODE_NAME from the downward API (status.hostIP, spec.nodeName).
*/}}
{{- define "nova.computeConfigRender" -}}
{{- $fields := list (dict "name" "MY_IP" "field" "status.hostIP") (dict "name" "NODE_NAME" "field" "spec.nodeName") -}}
{{- $step := index (include "osd-lib.configRender" (merge (dict "secretEnv" (concat .secretEnv $fields)) .) | fromYamlArray) 0 -}}
{{- $env := include "osd-lib.secretEnv" .secretEnv | fromYamlArray -}}
{{- range $fields -}}
{{- $env = append $env (dict "name" .name "valueFrom" (dict "fieldRef" (dict "fieldPath" .field))) -}}
{{- end -}}
{{- $_ := set $step "env" $env -}}
{{- toYaml (list $step) -}}
{{- end -}}

{{/*
Init container of the control-plane Deployments and of the cell-setup Job: waits until the
API and cell databases are at the newest schema of the image's nova (alembic heads), i.e.
until the nova-init Job's db syncs are done, instead of crash-looping (and backing off for
minutes) on missing tables. One Python process imports nova once and then reads each
database's alembic_version every 2 s (a fresh connection each time) for up to 30 minutes:
a new interpreter per check (nova's imports, about 3 s of CPU) in four pods and the cell
setup's nova-manage calls kept most of this 2-core machine busy while the Job ran.
The program is files/wait_db.py (TestNovaInDebianImage runs this step).
*/}}
{{- define "nova.waitDBStep" -}}
{{- $check := .ctx.Files.Get "files/wait_db.py" -}}
{{- include "osd-lib.commandStep" (merge (dict "name" "wait-db" "files" (dict "nova.conf" "/etc/nova/nova.conf") "command" (list "python3" "-c" $check)) .) -}}
{{- end -}}

{{/*
Last init step of nova-compute: waits until nova-conductor answers a ping on RabbitMQ (the
ping nova-compute itself sends before it registers: nova's BaseAPI on the conductor topic),
5 s per try, for up to 30 minutes. nova-compute's own wait tries ten times for 10 s, then
waits rpc_response_timeout (60 s) per try, and a ping sent before the conductor's queue
exists is lost: started with the release, long before the conductor (which waits for the
Job's db syncs, about 110 s), it lost up to a minute after the conductor came up (the
release's last stretch took 78 s, against 20 s when the conductor came within the ten tries).
The program is files/wait_conductor.py.
*/}}
{{- define "nova.waitConductorStep" -}}
{{- $check := .ctx.Files.Get "files/wait_conductor.py" -}}
{{- include "osd-lib.commandStep" (merge (dict "name" "wait-conductor" "files" (dict "nova.conf" "/etc/nova/nova.conf") "command" (list "python3" "-c" $check)) .) -}}
{{- end -}}

{{/*
A control-plane Deployment (osd-lib.workload): (dict "ctx" $ "component" "conductor"
"command" (list ...) "ports" (list ...) "probes" (dict for osd-lib.probes, optional)).
*/}}
{{- define "nova.deployment" -}}
{{- $ctx := .ctx -}}
{{- $args := merge (dict "ctx" $ctx) (include "nova.stepArgs" $ctx | fromJson) -}}
{{- $files := include "nova.configFiles" $ctx | fromJson -}}
{{- $init := concat (include "osd-lib.configRender" $args | fromYamlArray) (include "nova.waitDBStep" $args | fromYamlArray) -}}
{{- $main := include "osd-lib.container" (merge (dict "name" (printf "nova-%s" .component) "command" .command
      "ports" .ports "probes" .probes "resources" .component
      "files" (dict "nova.conf" "/etc/nova/nova.conf")) $args) | fromYamlArray -}}
{{- include "osd-lib.workload" (dict "ctx" $ctx "name" (printf "nova-%s" .component) "component" .component
      "uid" $ctx.Values.uid "checksum" (include "osd-lib.configChecksum" (dict "ctx" $ctx "files" $files))
      "initContainers" $init "containers" $main "volumes" (include "osd-lib.configVolumes" $args | fromYamlArray)) -}}
{{- end -}}
