{{/*
The day-one volume type (files/volume_type.py): one Python process (standard library) that logs in as admin,
waits for cinder-api in the catalog's internal endpoint, and makes the type TYPE_NAME with
extra spec volume_backend_name = BACKEND, or corrects the spec of the existing one.
(dict ... "name" "volume-type" "typeName" "ceph" "backend" "ceph" "description" "..."
"timeout" 600 "authURL" URL "region" R).
*/}}
{{- define "cinder.volumeTypeStep" -}}
- name: {{ .name }}
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    - python3
    - -c
    - {{ .ctx.Files.Get "files/volume_type.py" | quote }}
  env:
    {{- include "osd-lib.keystoneAdminEnv" . | nindent 4 }}
    - name: TYPE_NAME
      value: {{ .typeName | quote }}
    - name: BACKEND
      value: {{ .backend | quote }}
    - name: TYPE_DESCRIPTION
      value: {{ .description | quote }}
    - name: TIMEOUT
      value: {{ .timeout | quote }}
{{- end -}}
