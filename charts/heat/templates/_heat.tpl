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
One heat Deployment (osd-lib.workload) running a heat program with the rendered heat.conf:
(dict "ctx" $ "name" "heat-api" "component" "api" "command" (list ...) "port" 8004), plus
"cfnPort" 8000 for heat-server, which serves both APIs, and "check" (a command) for an
init container heat-check that runs before the service.
A port gives HTTP probes on GET / (the version document, no token); without one the
probes check that the process holds a connection to RabbitMQ's port 5672 (heat-engine):
port 5672 = 0x1628, state 01 = ESTABLISHED in /proc/net/tcp of the pod's network
namespace. No liveness probe then: a restart does not bring RabbitMQ back.
*/}}
{{- define "heat.deployment" -}}
{{- $ctx := .ctx -}}
{{- $args := merge (dict "ctx" $ctx) (include "heat.stepArgs" $ctx | fromJson) -}}
{{- $files := dict "heat.conf" "/etc/heat/heat.conf" -}}
{{- $init := include "osd-lib.configRender" $args | fromYamlArray -}}
{{- /* Not before the heat-init Job's db sync: on missing tables heat's engine exits. */ -}}
{{- $init = concat $init (include "osd-lib.waitDBStep" (merge (dict "file" "heat.conf" "conf" "/etc/heat/heat.conf" "section" "database" "schema" (include "heat.schema" $ctx) "job" "heat-init") $args) | fromYamlArray) -}}
{{- with .check -}}
{{- /* Heat started on demand: its configuration and API applications are loaded once
here, so that what Heat cannot load fails the pod now, not a user's first request. */ -}}
{{- $init = concat $init (include "osd-lib.container" (dict "ctx" $ctx "image" "openstack" "name" "heat-check" "command" . "files" $files) | fromYamlArray) -}}
{{- end -}}
{{- $main := dict "name" .name "command" .command "resources" .component "files" $files -}}
{{- if .port -}}
{{- $ports := list (dict "name" "api" "containerPort" .port) -}}
{{- with .cfnPort -}}
{{- $ports = append $ports (dict "name" "api-cfn" "containerPort" .) -}}
{{- end -}}
{{- $_ := set $main "ports" $ports -}}
{{- $_ := set $main "probes" (dict "http" (dict "path" "/" "port" .port)) -}}
{{- else -}}
{{- $engine := dict "exec" (dict "command" (list "/bin/sh" "-c" "grep -qE '^ *[0-9]+: [0-9A-F]+:[0-9A-F]+ [0-9A-F]+:1628 01 ' /proc/net/tcp /proc/net/tcp6")) -}}
{{- $_ := set $main "probeSpec" (dict
      "startupProbe" (merge (dict "periodSeconds" 2 "failureThreshold" 150 "timeoutSeconds" 5) $engine)
      "readinessProbe" (merge (dict "periodSeconds" 10 "failureThreshold" 3 "timeoutSeconds" 5) $engine)) -}}
{{- end -}}
{{- include "osd-lib.workload" (dict "ctx" $ctx "name" .name "component" .component "uid" $ctx.Values.uid
      "checksum" (include "heat.checksum" $ctx) "initContainers" $init
      "containers" (include "osd-lib.container" (merge $main $args) | fromYamlArray)
      "volumes" (include "osd-lib.configVolumes" $args | fromYamlArray)) -}}
{{- end -}}

{{/* heat.schema is where Heat's database schema is written down, for the wait-db step:
Zed's sqlalchemy-migrate repository, Alembic's versions from 2023.1 on. */}}
{{- define "heat.schema" -}}
{{- if eq (default "zed" .Values.openstackRelease) "zed" -}}migrate:heat/db/sqlalchemy/migrate_repo{{- else -}}alembic:heat/db/migrations{{- end -}}
{{- end -}}
