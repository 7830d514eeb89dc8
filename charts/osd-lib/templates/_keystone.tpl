{{/*
The Keystone steps. Their program is osd-lib's files/keystone.py (Python, standard library
only), run by osd-lib.keystoneRegisterStep ("register") and heat's stack-domain step
("stack-domain"): one interpreter speaking Keystone's REST API, not one openstack client
process per call.
*/}}
{{/*
The admin credentials every Keystone step authenticates with: (dict "authURL" URL "region" R).
*/}}
{{- define "osd-lib.keystoneAdminEnv" -}}
- name: OS_AUTH_URL
  value: {{ .authURL | default "http://keystone-api:5000/v3" | quote }}
- name: OS_USERNAME
  value: admin
- name: OS_PROJECT_NAME
  value: admin
- name: OS_USER_DOMAIN_NAME
  value: Default
- name: OS_PROJECT_DOMAIN_NAME
  value: Default
- name: OS_REGION_NAME
  value: {{ .region | default "RegionOne" | quote }}
- name: OS_PASSWORD
  valueFrom:
    secretKeyRef: {name: keystone-admin, key: password}
{{- end -}}

{{/*
One init step running the Keystone program in the openstack image:
(dict "ctx" $ "name" "stack-domain" "mode" "stack-domain" "env" (list ...)).
*/}}
{{- define "osd-lib.keystoneStep" -}}
- name: {{ .name }}
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - python3
    - -c
    - {{ include "osd-lib.file" (dict "ctx" .ctx "path" "files/keystone.py") | quote }}
    - {{ .mode }}
  env:
    {{- include "osd-lib.keystoneAdminEnv" . | nindent 4 }}
    {{- with .env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/*
Keystone service user, service and endpoints (idempotent: looked up, created when missing,
endpoints corrected when their URL changed). The endpoint URLs travel as environment
variables, so URLs such as .../v1/%(tenant_id)s never meet a shell's parser:
(dict ... "name" "keystone-register" "user" "glance" "passwordSecret" "glance-keystone"
"service" (dict "name" "glance" "type" "image" "description" "...") "roles" (list "service")
"endpoints" (dict "public" URL "internal" URL "admin" URL) "authURL" URL "region" R).
Without "user" only the service and its endpoints are registered. "roles" are the user's
roles on project service (default admin and service; files/keystone.py's register).
*/}}
{{- define "osd-lib.keystoneRegisterStep" -}}
{{- $env := list -}}
{{- if .user -}}
{{- $env = append $env (dict "name" "SVC_USER" "value" .user) -}}
{{- $env = append $env (dict "name" "SVC_PASSWORD" "valueFrom" (dict "secretKeyRef" (dict "name" .passwordSecret "key" "password"))) -}}
{{- $roles := .roles | default (list "admin" "service") -}}
{{- range $roles }}{{ if not (has . (list "admin" "service")) }}{{ fail (printf "keystone.roles: %q is not a role osd manages for a service user: use admin and/or service" .) }}{{ end }}{{ end -}}
{{- $env = append $env (dict "name" "SVC_ROLES" "value" (join "," $roles)) -}}
{{- end -}}
{{- $env = append $env (dict "name" "SVC_NAME" "value" .service.name) -}}
{{- $env = append $env (dict "name" "SVC_TYPE" "value" .service.type) -}}
{{- $env = append $env (dict "name" "SVC_DESCRIPTION" "value" (.service.description | default .service.name)) -}}
{{- $env = append $env (dict "name" "ENDPOINT_PUBLIC" "value" .endpoints.public) -}}
{{- $env = append $env (dict "name" "ENDPOINT_INTERNAL" "value" .endpoints.internal) -}}
{{- $env = append $env (dict "name" "ENDPOINT_ADMIN" "value" .endpoints.admin) -}}
{{- include "osd-lib.keystoneStep" (merge (dict "name" (.name | default "keystone-register") "mode" "register" "env" $env) .) -}}
{{- end -}}
