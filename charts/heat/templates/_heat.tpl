{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "heat.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "HEAT_DB_PASSWORD" "secret" "heat-db" "key" "password")
      (dict "name" "HEAT_KEYSTONE_PASSWORD" "secret" "heat-keystone" "key" "password")
      (dict "name" "HEAT_MEMCACHE_SECRET_KEY" "secret" "heat-keystone" "key" "memcache-secret-key")
      (dict "name" "HEAT_DOMAIN_PASSWORD" "secret" "heat-domain" "key" "password")
      (dict "name" "HEAT_AUTH_ENCRYPTION_KEY" "secret" "heat-domain" "key" "auth-encryption-key")
      (dict "name" "HEAT_RABBITMQ_PASSWORD" "secret" "heat-rabbitmq" "key" "password") -}}
{{- toJson (dict "image" "openstack" "configSecret" "heat-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{/*
heat.conf's sections: conf.heat, with heat_metadata_server_url and
heat_waitcondition_server_url following endpoints.cfn.public unless conf sets them
(instances reach heat-api-cfn there, so it must be the public address).
*/}}
{{- define "heat.conf" -}}
{{- $conf := deepCopy .Values.conf.heat -}}
{{- $default := index $conf "DEFAULT" | default dict -}}
{{- $cfn := trimSuffix "/" .Values.endpoints.cfn.public -}}
{{- if not (index $default "heat_metadata_server_url") -}}
{{- $_ := set $default "heat_metadata_server_url" $cfn -}}
{{- end -}}
{{- if not (index $default "heat_waitcondition_server_url") -}}
{{- $_ := set $default "heat_waitcondition_server_url" (printf "%s/v1/waitcondition" $cfn) -}}
{{- end -}}
{{- $_ := set $conf "DEFAULT" $default -}}
{{- toJson $conf -}}
{{- end -}}

{{- define "heat.configFiles" -}}
{{- toJson (dict "heat.conf" (include "heat.conf" . | fromJson)) -}}
{{- end -}}

{{- define "heat.checksum" -}}
{{- include "osd-lib.configChecksum" (dict "ctx" . "files" (include "heat.configFiles" . | fromJson)) -}}
{{- end -}}

{{/*
The stack domain (idempotent): domain, its admin user with the admin role on the domain,
the stack owner and stack user roles, and the owner role for admin on project admin.
(dict "ctx" $ "image" "openstack" "domain" "heat" "domainAdmin" "heat_domain_admin"
"ownerRole" "heat_stack_owner" "userRole" "heat_stack_user" "authURL" URL "region" R).
*/}}
{{- define "heat.stackDomainStep" -}}
{{- $env := list (dict "name" "STACK_DOMAIN" "value" .domain) (dict "name" "DOMAIN_ADMIN" "value" .domainAdmin)
      (dict "name" "DOMAIN_ADMIN_PASSWORD" "valueFrom" (dict "secretKeyRef" (dict "name" "heat-domain" "key" "password")))
      (dict "name" "OWNER_ROLE" "value" .ownerRole) (dict "name" "USER_ROLE" "value" .userRole) -}}
{{- include "osd-lib.keystoneStep" (merge (dict "name" "stack-domain" "mode" "stack-domain" "env" $env) .) -}}
{{- end -}}

{{/* "true" when heat's APIs and engine share one process, heat-server (one replica). */}}
{{- define "heat.combined" -}}
{{- eq (int .Values.replicas) 1 -}}
{{- end -}}

{{/*
One heat Deployment running a heat program with the rendered heat.conf:
(dict "ctx" $ "name" "heat-api" "component" "api" "command" (list ...) "port" 8004), plus
"cfnPort" 8000 for heat-server, which serves both APIs, and "check" (a command) for an
init container heat-check that runs before the service.
A port gives HTTP probes on GET / (the version document, no token); without one the
probes check that the process holds a connection to RabbitMQ's port 5672 (heat-engine).
*/}}
{{- define "heat.deployment" -}}
{{- $ctx := .ctx -}}
{{- $args := merge (dict "ctx" $ctx) (include "heat.stepArgs" $ctx | fromJson) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
spec:
  replicas: {{ $ctx.Values.replicas }}
  selector:
    matchLabels:
      {{- include "osd-lib.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "osd-lib.labels" (dict "ctx" $ctx "component" .component) | nindent 8 }}
      annotations:
        checksum/config: {{ include "heat.checksum" $ctx }}
    spec:
      enableServiceLinks: false
      {{- include "osd-lib.controlPlane" (dict "ctx" $ctx) | nindent 6 }}
      {{- include "osd-lib.podSecurity" (dict "uid" $ctx.Values.uid) | nindent 6 }}
      initContainers:
        {{- include "osd-lib.configRender" $args | nindent 8 }}
        {{- /* Not before the heat-init Job's db sync: on missing tables heat's engine exits. */}}
        {{- include "osd-lib.waitDBStep" (merge (dict "file" "heat.conf" "conf" "/etc/heat/heat.conf" "section" "database" "schema" "migrate:heat/db/sqlalchemy/migrate_repo" "job" "heat-init") $args) | nindent 8 }}
        {{- with .check }}
        {{- /* Heat started on demand: its configuration and API applications are loaded
        once here, so that what Heat cannot load fails the pod now, not a user's first
        request. */}}
        - name: heat-check
          image: {{ include "osd-lib.image" $args }}
          imagePullPolicy: Never
          command:
            {{- toYaml . | nindent 12 }}
          volumeMounts:
            {{- include "osd-lib.configMounts" (dict "files" (dict "heat.conf" "/etc/heat/heat.conf")) | nindent 12 }}
        {{- end }}
      containers:
        - name: {{ .name }}
          image: {{ include "osd-lib.image" $args }}
          imagePullPolicy: Never
          command:
            {{- toYaml .command | nindent 12 }}
          {{- if .port }}
          ports:
            - {name: api, containerPort: {{ .port }}}
            {{- with .cfnPort }}
            - {name: api-cfn, containerPort: {{ . }}}
            {{- end }}
          {{- include "osd-lib.probes" (dict "http" (dict "path" "/" "port" .port)) | nindent 10 }}
          {{- else }}
          # Ready once an engine process holds a connection to RabbitMQ (port 5672 =
          # 0x1628, state 01 = ESTABLISHED in /proc/net/tcp of the pod's network
          # namespace). No liveness probe: a restart does not bring RabbitMQ back.
          startupProbe:
            exec:
              command: [/bin/sh, -c, "grep -qE '^ *[0-9]+: [0-9A-F]+:[0-9A-F]+ [0-9A-F]+:1628 01 ' /proc/net/tcp /proc/net/tcp6"]
            periodSeconds: 2
            failureThreshold: 150
            timeoutSeconds: 5
          readinessProbe:
            exec:
              command: [/bin/sh, -c, "grep -qE '^ *[0-9]+: [0-9A-F]+:[0-9A-F]+ [0-9A-F]+:1628 01 ' /proc/net/tcp /proc/net/tcp6"]
            periodSeconds: 10
            failureThreshold: 3
            timeoutSeconds: 5
          {{- end }}
          {{- include "osd-lib.resources" (dict "ctx" $ctx "component" .component) | nindent 10 }}
          volumeMounts:
            {{- include "osd-lib.configMounts" (dict "files" (dict "heat.conf" "/etc/heat/heat.conf")) | nindent 12 }}
      volumes:
        {{- include "osd-lib.configVolumes" $args | nindent 8 }}
{{- end -}}

{{/* A NodePort (or ClusterIP) Service: (dict "ctx" $ "name" "heat-api" "component" "api" "port" 8004 "nodePort" 30004). */}}
{{- define "heat.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
spec:
  type: {{ .ctx.Values.service.type }}
  selector:
    {{- include "osd-lib.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
  ports:
    - name: api
      port: {{ .port }}
      targetPort: {{ .port }}
      {{- if eq .ctx.Values.service.type "NodePort" }}
      nodePort: {{ .nodePort }}
      {{- end }}
{{- end -}}
