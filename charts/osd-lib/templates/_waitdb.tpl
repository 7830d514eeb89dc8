{{/*
Init container of a service's long-running pods: waits until the service's database is at
the schema of the image's code (the init Job's db sync) instead of the service crash-looping
on missing tables (files/wait_db.py of osd-lib, Python with SQLAlchemy): (dict ... "file" "placement.conf" "conf"
"/etc/placement/placement.conf" "section" "placement_database" "schema"
"alembic:placement/db/sqlalchemy/alembic" "job" "placement-init"), optional "timeout"
(seconds, 1800).
*/}}
{{- define "osd-lib.waitDBStep" -}}
{{- $command := list "/usr/bin/python3" "-c" (include "osd-lib.file" (dict "ctx" .ctx "path" "files/wait_db.py")) .conf .section .schema .job (printf "%d" (int (.timeout | default 1800))) -}}
{{- include "osd-lib.commandStep" (merge (dict "name" "wait-db" "files" (dict .file .conf) "command" $command) .) -}}
{{- end -}}
