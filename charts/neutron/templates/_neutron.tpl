{{/* Arguments shared by the osd-lib step templates. */}}
{{- define "neutron.stepArgs" -}}
{{- $secretEnv := list
      (dict "name" "NEUTRON_DB_PASSWORD" "secret" "neutron-db" "key" "password")
      (dict "name" "NEUTRON_KEYSTONE_PASSWORD" "secret" "neutron-keystone" "key" "password")
      (dict "name" "NEUTRON_MEMCACHE_SECRET_KEY" "secret" "neutron-keystone" "key" "memcache-secret-key")
      (dict "name" "NOVA_KEYSTONE_PASSWORD" "secret" "nova-keystone" "key" "password")
      (dict "name" "NEUTRON_RABBITMQ_PASSWORD" "secret" "neutron-rabbitmq" "key" "password")
      (dict "name" "METADATA_SECRET" "secret" "metadata-proxy" "key" "shared-secret") -}}
{{- toJson (dict "image" "openstack" "configSecret" "neutron-config" "secretEnv" $secretEnv) -}}
{{- end -}}

{{- define "neutron.configFiles" -}}
{{- toJson (dict "neutron.conf" .Values.conf.neutron "ml2_conf.ini" .Values.conf.ml2 "metadata_agent.ini" .Values.conf.metadata) -}}
{{- end -}}

{{/* The files neutron-server reads, where the package puts them. */}}
{{- define "neutron.serverFiles" -}}
{{- toJson (dict "neutron.conf" "/etc/neutron/neutron.conf" "ml2_conf.ini" "/etc/neutron/plugins/ml2/ml2_conf.ini") -}}
{{- end -}}

{{/*
Init container of neutron-server: waits until the neutron database holds the expand and
contract heads of the image's migrations (neutron ships them as EXPAND_HEAD and
CONTRACT_HEAD), i.e. until the neutron-init Job's `upgrade heads` is done, instead of
crash-looping on missing tables while the Job runs (the kubelet's back-off then delays
the server for minutes after it).
*/}}
{{- define "neutron.waitDBStep" -}}
{{- $check := `import configparser, importlib.util, os, sys
import sqlalchemy
versions = os.path.join(importlib.util.find_spec("neutron").submodule_search_locations[0], "db", "migration", "alembic_migrations", "versions")
heads = set()
for f in ("EXPAND_HEAD", "CONTRACT_HEAD"):
    with open(os.path.join(versions, f)) as h:
        heads.add(h.read().strip())
conf = configparser.ConfigParser(interpolation=None)
conf.read("/etc/neutron/neutron.conf")
try:
    with sqlalchemy.create_engine(conf["database"]["connection"]).connect() as db:
        current = {row[0] for row in db.execute(sqlalchemy.text("SELECT version_num FROM alembic_version"))}
except sqlalchemy.exc.SQLAlchemyError as e:
    current = set()
if not heads <= current:
    sys.exit("neutron database at %s, want %s: waiting for the neutron-init Job" % (" ".join(sorted(current)) or "no schema", " ".join(sorted(heads))))
print("neutron database at %s" % " ".join(sorted(current)))
` -}}
{{- $script := printf "i=0\nuntil python3 -c '%s'; do\n  i=$((i+1)); [ \"$i\" -lt 360 ] || exit 1\n  sleep 5\ndone\n" $check -}}
{{- include "osd-lib.commandStep" (merge (dict "name" "wait-db" "files" (dict "neutron.conf" "/etc/neutron/neutron.conf") "command" (list "/bin/sh" "-ec" $script)) .) -}}
{{- end -}}
