{{/*
Pod-level pieces shared by the OpenStack services: the config-render init container, the
database-create, db-sync and Keystone-registration steps, and the Job that runs steps in
order. Steps are init containers of one Job, so their order needs no Helm hook: the
controller waits for the Job to complete before it calls the release Ready.

Common arguments (a dict):
  ctx        the chart's root context
  image      image name in .Values.images (e.g. "openstack")
  configSecret  name of the Secret made by osd-lib.configSecret
  secretEnv  list of (dict "name" "key" "secret") exposed as env and as @@NAME@@ placeholders
*/}}

{{/* Volumes for config rendering: the templates Secret and the rendered emptyDir. */}}
{{- define "osd-lib.configVolumes" -}}
- name: config-templates
  secret:
    secretName: {{ .configSecret }}
    defaultMode: 0440
- name: config
  emptyDir:
    medium: Memory
{{- end -}}

{{/* Init container rendering /etc/osd/templates/* into /etc/osd/config/*. */}}
{{- define "osd-lib.configRender" -}}
- name: config-render
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - /bin/sh
    - -ec
    - |
      # The substitutions go to sed in a script file (written by the shell's builtin
      # printf, readable by this user only, removed at exit), never on its command line,
      # where every local user could read them in /proc/PID/cmdline.
      umask 077
      script=/etc/osd/config/.render.sed
      trap 'rm -f "$script"' EXIT
      : > "$script"
      {{- range .secretEnv }}
      printf 's|@@%s@@|%s|g\n' {{ .name }} "${{ "{" }}{{ .name }}{{ "}" }}" >> "$script"
      {{- end }}
      umask 027
      for f in /etc/osd/templates/*; do
        sed -f "$script" "$f" > "/etc/osd/config/$(basename "$f")"
      done
  env:
    {{- include "osd-lib.secretEnv" .secretEnv | indent 4 }}
  volumeMounts:
    - name: config-templates
      mountPath: /etc/osd/templates
      readOnly: true
    - name: config
      mountPath: /etc/osd/config
{{- end -}}

{{/*
Database and user creation (idempotent), with the mysql client of the service image and
MariaDB's root password: (dict ... "database" "keystone" "user" "keystone"
"passwordSecret" "keystone-db" "host" "mariadb"). Waits for MariaDB first.
*/}}
{{- define "osd-lib.dbCreateStep" -}}
- name: db-create
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - /bin/sh
    - -ec
    - |
      export MYSQL_PWD="$ROOT_PASSWORD"
      i=0
      until mysqladmin --host="$DB_HOST" --user=root ping >/dev/null 2>&1; do
        i=$((i+1)); [ "$i" -lt 150 ] || { echo "mariadb at $DB_HOST does not answer"; exit 1; }
        sleep 2
      done
      mysql --host="$DB_HOST" --user=root <<SQL
      CREATE DATABASE IF NOT EXISTS \`$DB_NAME\`;
      CREATE USER IF NOT EXISTS '$DB_USER'@'%' IDENTIFIED BY '$DB_PASSWORD';
      ALTER USER '$DB_USER'@'%' IDENTIFIED BY '$DB_PASSWORD';
      GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO '$DB_USER'@'%';
      SQL
      echo "database $DB_NAME and user $DB_USER ready"
  env:
    - name: DB_HOST
      value: {{ .host | default "mariadb" | quote }}
    - name: DB_NAME
      value: {{ .database | quote }}
    - name: DB_USER
      value: {{ .user | quote }}
    - name: ROOT_PASSWORD
      valueFrom:
        secretKeyRef: {name: mariadb-root, key: password}
    - name: DB_PASSWORD
      valueFrom:
        secretKeyRef: {name: {{ .passwordSecret }}, key: password}
{{- end -}}

{{/*
A step running a command with the rendered config files mounted at their paths:
(dict ... "name" "db-sync" "command" (list ...) "files" (dict "keystone.conf" "/etc/keystone/keystone.conf")).
*/}}
{{- define "osd-lib.commandStep" -}}
- name: {{ .name }}
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    {{- toYaml .command | nindent 4 }}
  env:
    {{- include "osd-lib.secretEnv" .secretEnv | indent 4 }}
  volumeMounts:
    {{- include "osd-lib.configMounts" . | nindent 4 }}
    {{- with .mounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{- define "osd-lib.configMounts" -}}
{{- range $file, $path := .files }}
- name: config
  mountPath: {{ $path }}
  subPath: {{ $file }}
  readOnly: true
{{- end }}
{{- end -}}


{{/*
A Job running steps in order: (dict "ctx" $ "name" "keystone-init" "steps" (include ... | fromYamlArray)
"volumes" (list ...) "checksum" (include "osd-lib.configChecksum" ...) and optionally
"securityContext" (a pod security context), "nodeSelector" (a dict)). The name carries a hash of the steps and the config checksum, so changed steps (new config,
new image) run as a new Job instead of failing on the immutable pod template; the old Job
leaves with the old release manifest. The last step is the main container.
*/}}
{{- define "osd-lib.job" -}}
{{- $steps := .steps -}}
{{- $hash := toJson (dict "steps" $steps "volumes" .volumes "checksum" (.checksum | default "")) | sha256sum | trunc 10 -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .name }}-{{ $hash }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" .ctx "component" .name) | nindent 4 }}
    osd.io/job: {{ .name }}
spec:
  backoffLimit: {{ .backoffLimit | default 6 }}
  template:
    metadata:
      labels:
        {{- include "osd-lib.labels" (dict "ctx" .ctx "component" .name) | nindent 8 }}
        osd.io/job: {{ .name }}
      {{- with .checksum }}
      annotations:
        checksum/config: {{ . }}
      {{- end }}
    spec:
      restartPolicy: Never
      enableServiceLinks: false
      {{- with .securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if gt (len $steps) 1 }}
      initContainers:
        {{- toYaml (initial $steps) | nindent 8 }}
      {{- end }}
      containers:
        {{- toYaml (list (last $steps)) | nindent 8 }}
      {{- with .volumes }}
      volumes:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
