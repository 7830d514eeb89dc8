{{/*
INI from section -> key -> value, the same rules as deploy.RenderINI in Go: DEFAULT first,
then sections and keys sorted (Go templates range over maps in key order), lists
comma-joined, booleans true/false, nulls omitted; newlines are refused, and names that
would start another line, section, key or comment (oslo.config splits a line at the
first '=' or ':', and continues a value on a line that starts with a space).
*/}}
{{- define "osd-lib.iniValue" -}}
{{- $v := . -}}
{{- if kindIs "slice" $v -}}
{{- $parts := list -}}
{{- range $v }}{{ $parts = append $parts (toString .) }}{{ end -}}
{{- $v = join "," $parts -}}
{{- else if and (kindIs "float64" $v) (eq (floor $v) $v) -}}
{{- $v = int64 $v -}}
{{- end -}}
{{- $s := toString $v -}}
{{- if or (contains "\n" $s) (contains "\r" $s) -}}
{{- fail "ini: value contains a newline" -}}
{{- end -}}
{{- $s -}}
{{- end -}}

{{- define "osd-lib.iniSection" -}}
{{- if or (eq .name "") (regexMatch `[][\r\n]` .name) (ne (trim .name) .name) -}}
{{- fail (printf "ini: section name %q is invalid (empty, brackets, newlines or outer spaces)" .name) -}}
{{- end -}}
[{{ .name }}]
{{ range $k, $v := .keys -}}
{{- if or (eq $k "") (regexMatch `[=:\[\r\n]` $k) (ne (trim $k) $k) (hasPrefix "#" $k) (hasPrefix ";" $k) -}}
{{- fail (printf "ini: key %q in [%s] is invalid (empty, '=', ':', '[', newlines, outer spaces or a comment mark)" $k $.name) -}}
{{- end -}}
{{- if not (kindIs "invalid" $v) -}}
{{ $k }} = {{ include "osd-lib.iniValue" $v }}
{{ end -}}
{{- end -}}
{{- end -}}

{{- define "osd-lib.ini" -}}
{{- $out := list -}}
{{- if hasKey . "DEFAULT" -}}
{{- $out = append $out (include "osd-lib.iniSection" (dict "name" "DEFAULT" "keys" (index . "DEFAULT"))) -}}
{{- end -}}
{{- range $name, $keys := . -}}
{{- if ne $name "DEFAULT" -}}
{{- $out = append $out (include "osd-lib.iniSection" (dict "name" $name "keys" $keys)) -}}
{{- end -}}
{{- end -}}
{{- join "\n" $out -}}
{{- end -}}

{{/*
Config files: (dict "ctx" $ "files" (dict "keystone.conf" .Values.conf.keystone ...)).
Each value is a section map rendered as INI. Secrets are never in values: a value may
carry a placeholder @@NAME@@ that the config-render init container replaces with the
environment variable NAME (from a Kubernetes Secret) when the pod starts.
*/}}
{{- define "osd-lib.configFiles" -}}
{{- range $name, $sections := .files }}
{{ $name }}: {{ include "osd-lib.ini" $sections | toJson }}
{{- end }}
{{- end -}}

{{- define "osd-lib.configSecret" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" .ctx "component" "config") | nindent 4 }}
type: Opaque
stringData:
  {{- include "osd-lib.configFiles" . | indent 2 }}
{{- end -}}

{{/*
Checksum of the rendered config files, for a pod template annotation: a values change
restarts the pods (rolling), an unchanged config does not.
*/}}
{{- define "osd-lib.configChecksum" -}}
{{- include "osd-lib.configFiles" . | sha256sum -}}
{{- end -}}
