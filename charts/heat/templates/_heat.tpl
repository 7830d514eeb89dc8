{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "heat.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "HEAT_DB_PASSWORD" "secret" "heat-db" "key" "password")
      (dict "name" "HEAT_KEYSTONE_PASSWORD" "secret" "heat-keystone" "key" "password")
      (dict "name" "HEAT_DOMAIN_PASSWORD" "secret" "heat-domain" "key" "password")
      (dict "name" "HEAT_AUTH_ENCRYPTION_KEY" "secret" "heat-domain" "key" "auth-encryption-key")
      (dict "name" "RABBITMQ_PASSWORD" "secret" "rabbitmq-credentials" "key" "password") -}}
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
Environment of the steps talking to Keystone as its admin user. OS_INTERFACE internal:
after authenticating, the client uses the catalog's in-cluster identity endpoint rather
than the public one (a NodePort on the node's address, which the pod need not reach).
*/}}
{{- define "heat.adminEnv" -}}
- name: OS_AUTH_URL
  value: {{ .authURL | quote }}
- name: OS_INTERFACE
  value: internal
- name: OS_IDENTITY_API_VERSION
  value: "3"
- name: OS_USERNAME
  value: admin
- name: OS_PROJECT_NAME
  value: admin
- name: OS_USER_DOMAIN_NAME
  value: Default
- name: OS_PROJECT_DOMAIN_NAME
  value: Default
- name: OS_REGION_NAME
  value: {{ .region | quote }}
- name: OS_PASSWORD
  valueFrom:
    secretKeyRef: {name: keystone-admin, key: password}
{{- end -}}

{{/*
Shell lines defining osc (the openstack client, retried up to 5 times when the connection
to Keystone drops: uwsgi closes connections, a client may reuse a closed one) and waiting
until Keystone issues tokens.
*/}}
{{- define "heat.waitKeystone" -}}
osc() {
  n=0
  while :; do
    if out=$(openstack "$@" 2>&1); then
      [ -z "$out" ] || printf '%s\n' "$out"
      return 0
    fi
    case $out in
      *"Unable to establish connection"*|*"Connection aborted"*|*"RemoteDisconnected"*|*"Connection reset"*) ;;
      *) printf '%s\n' "$out" >&2; return 1 ;;
    esac
    n=$((n+1))
    [ "$n" -lt 5 ] || { printf '%s\n' "$out" >&2; return 1; }
    sleep 1
  done
}
i=0
until openstack token issue >/dev/null 2>&1; do
  i=$((i+1)); [ "$i" -lt 150 ] || { echo "keystone at $OS_AUTH_URL does not issue tokens"; exit 1; }
  sleep 2
done
{{- end -}}

{{/*
Keystone registration of one service (idempotent: show || create, endpoints corrected
when their URL changed), optionally with its service user in project service. Unlike
osd-lib.keystoneRegisterStep it takes a step name (heat registers two services in one Job)
and passes the endpoint URLs as environment variables, so URLs such as
.../v1/%(tenant_id)s never meet the shell's parser.
(dict "ctx" $ "image" "openstack" "name" "keystone-register" "user" "heat"
"passwordSecret" "heat-keystone" "service" (dict "name" "type" "description")
"endpoints" (dict "public" URL "internal" URL "admin" URL) "authURL" URL "region" R).
*/}}
{{- define "heat.keystoneRegisterStep" -}}
- name: {{ .name }}
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - /bin/sh
    - -ec
    - |
      {{- include "heat.waitKeystone" . | nindent 6 }}
      if [ -n "$SVC_USER" ]; then
        osc project show --domain default service >/dev/null 2>&1 || osc project create --domain default --description "OpenStack services" service
        osc user show --domain default "$SVC_USER" >/dev/null 2>&1 || osc user create --domain default --password "$SVC_PASSWORD" "$SVC_USER"
        osc user set --domain default --password "$SVC_PASSWORD" "$SVC_USER"
        osc role add --project service --project-domain default --user "$SVC_USER" --user-domain default admin
      fi
      osc service show "$SVC_NAME" >/dev/null 2>&1 || osc service create --name "$SVC_NAME" --description "$SVC_DESCRIPTION" "$SVC_TYPE"
      for iface in public internal admin; do
        case $iface in
          public) url=$ENDPOINT_PUBLIC ;;
          internal) url=$ENDPOINT_INTERNAL ;;
          admin) url=$ENDPOINT_ADMIN ;;
        esac
        id=$(osc endpoint list --service "$SVC_NAME" --interface "$iface" --region "$OS_REGION_NAME" -f value -c ID | head -n1)
        if [ -z "$id" ]; then
          osc endpoint create --region "$OS_REGION_NAME" "$SVC_NAME" "$iface" "$url"
        elif [ "$(osc endpoint show "$id" -f value -c url)" != "$url" ]; then
          osc endpoint set --url "$url" "$id"
        fi
      done
      echo "keystone registration of $SVC_NAME done"
  env:
    {{- include "heat.adminEnv" . | nindent 4 }}
    - name: SVC_USER
      value: {{ .user | default "" | quote }}
    {{- if .user }}
    - name: SVC_PASSWORD
      valueFrom:
        secretKeyRef: {name: {{ .passwordSecret }}, key: password}
    {{- end }}
    - name: SVC_NAME
      value: {{ .service.name | quote }}
    - name: SVC_TYPE
      value: {{ .service.type | quote }}
    - name: SVC_DESCRIPTION
      value: {{ .service.description | default .service.name | quote }}
    - name: ENDPOINT_PUBLIC
      value: {{ .endpoints.public | quote }}
    - name: ENDPOINT_INTERNAL
      value: {{ .endpoints.internal | quote }}
    - name: ENDPOINT_ADMIN
      value: {{ .endpoints.admin | quote }}
{{- end -}}

{{/*
The stack domain (idempotent): domain, its admin user with the admin role on the domain,
the stack owner and stack user roles, and the owner role for admin on project admin.
(dict "ctx" $ "image" "openstack" "domain" "heat" "domainAdmin" "heat_domain_admin"
"ownerRole" "heat_stack_owner" "userRole" "heat_stack_user" "authURL" URL "region" R).
*/}}
{{- define "heat.stackDomainStep" -}}
- name: stack-domain
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - /bin/sh
    - -ec
    - |
      {{- include "heat.waitKeystone" . | nindent 6 }}
      osc domain show "$STACK_DOMAIN" >/dev/null 2>&1 || osc domain create --description "Heat stack projects and users" "$STACK_DOMAIN"
      osc user show --domain "$STACK_DOMAIN" "$DOMAIN_ADMIN" >/dev/null 2>&1 || osc user create --domain "$STACK_DOMAIN" --password "$DOMAIN_ADMIN_PASSWORD" "$DOMAIN_ADMIN"
      osc user set --domain "$STACK_DOMAIN" --password "$DOMAIN_ADMIN_PASSWORD" "$DOMAIN_ADMIN"
      osc role add --domain "$STACK_DOMAIN" --user "$DOMAIN_ADMIN" --user-domain "$STACK_DOMAIN" admin
      for role in "$OWNER_ROLE" "$USER_ROLE"; do
        osc role show "$role" >/dev/null 2>&1 || osc role create "$role"
      done
      osc role add --project admin --project-domain Default --user admin --user-domain Default "$OWNER_ROLE"
      echo "stack domain $STACK_DOMAIN with $DOMAIN_ADMIN ready"
  env:
    {{- include "heat.adminEnv" . | nindent 4 }}
    - name: STACK_DOMAIN
      value: {{ .domain | quote }}
    - name: DOMAIN_ADMIN
      value: {{ .domainAdmin | quote }}
    - name: DOMAIN_ADMIN_PASSWORD
      valueFrom:
        secretKeyRef: {name: heat-domain, key: password}
    - name: OWNER_ROLE
      value: {{ .ownerRole | quote }}
    - name: USER_ROLE
      value: {{ .userRole | quote }}
{{- end -}}

{{/*
One heat Deployment running a heat program with the rendered heat.conf:
(dict "ctx" $ "name" "heat-api" "component" "api" "command" (list ...) "port" 8004).
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
      {{- include "osd-lib.podSecurity" (dict "uid" $ctx.Values.uid) | nindent 6 }}
      initContainers:
        {{- include "osd-lib.configRender" $args | nindent 8 }}
      containers:
        - name: {{ .name }}
          image: {{ include "osd-lib.image" $args }}
          imagePullPolicy: Never
          command:
            {{- toYaml .command | nindent 12 }}
          {{- if .port }}
          ports:
            - {name: api, containerPort: {{ .port }}}
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
