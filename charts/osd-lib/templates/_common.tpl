{{/*
Common labels. Call with (dict "ctx" $ "component" "api").
*/}}
{{- define "osd-lib.labels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: osd
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{/*
Selector labels (immutable on Deployments/StatefulSets: never add to this list).
*/}}
{{- define "osd-lib.selectorLabels" -}}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Image reference by image name: (dict "ctx" $ "image" "openstack"). Fails when the
controller did not hand the reference in .Values.images.
*/}}
{{- define "osd-lib.image" -}}
{{- $ref := index (.ctx.Values.images | default dict) .image -}}
{{- if not $ref -}}
{{- fail (printf "values: images.%s is not set" .image) -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/*
Resources block from .Values.resources.<component> (may be empty).
*/}}
{{- define "osd-lib.resources" -}}
{{- $r := index (.ctx.Values.resources | default dict) .component -}}
{{- if $r }}
resources:
  {{- toYaml $r | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
Probes. (dict "http" (dict "path" "/v3" "port" 5000)) or (dict "tcp" 11211) or
(dict "exec" (list "sh" "-c" "...")) plus optional "timeout" (seconds), "startupPeriod",
"startupFailures", "readinessPeriod". Readiness is quick,
liveness is patient (a busy service is not killed).
*/}}
{{- define "osd-lib.probeAction" -}}
{{- if .http -}}
httpGet:
  path: {{ .http.path }}
  port: {{ .http.port }}
{{- else if .tcp -}}
tcpSocket:
  port: {{ .tcp }}
{{- else if .exec -}}
exec:
  command:
    {{- toYaml .exec | nindent 4 }}
{{- else -}}
{{- fail "osd-lib.probes: give http, tcp or exec" -}}
{{- end -}}
{{- end -}}

{{- define "osd-lib.probes" -}}
startupProbe:
  {{- include "osd-lib.probeAction" . | nindent 2 }}
  periodSeconds: {{ .startupPeriod | default 2 }}
  failureThreshold: {{ .startupFailures | default 150 }}
  timeoutSeconds: {{ .timeout | default 5 }}
readinessProbe:
  {{- include "osd-lib.probeAction" . | nindent 2 }}
  periodSeconds: {{ .readinessPeriod | default 5 }}
  failureThreshold: 3
  timeoutSeconds: {{ .timeout | default 5 }}
livenessProbe:
  {{- include "osd-lib.probeAction" . | nindent 2 }}
  periodSeconds: 30
  failureThreshold: 6
  timeoutSeconds: {{ .timeout | default 10 }}
{{- end -}}

{{/*
Environment entries from Secrets: (list (dict "name" "DB_PASSWORD" "secret" "keystone-db" "key" "password")).
*/}}
{{- define "osd-lib.secretEnv" -}}
{{- range . }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
{{- end }}
{{- end -}}

{{/*
Pod security context running as a service user: (dict "uid" 901) - uid doubles as gid and
fsGroup, so Secret and emptyDir volumes are readable by the service and nobody else.
*/}}
{{- define "osd-lib.podSecurity" -}}
securityContext:
  runAsUser: {{ .uid }}
  runAsGroup: {{ .uid }}
  runAsNonRoot: true
  fsGroup: {{ .uid }}
{{- end -}}

{{/*
Init container giving a host directory to the service user: (dict "ctx" $ "image" "mariadb"
"uid" 910 "volume" "data" "path" "/var/lib/mysql"). Runs as root; only chowns the top directory.
*/}}
{{- define "osd-lib.chownStep" -}}
- name: chown-{{ .volume }}
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command: [chown, "{{ .uid }}:{{ .uid }}", {{ .path | quote }}]
  securityContext:
    runAsUser: 0
    runAsNonRoot: false
  volumeMounts:
    - name: {{ .volume }}
      mountPath: {{ .path }}
{{- end -}}

{{/*
Keeps a control-plane pod on the nodes with the control role: (dict "ctx" $). Their
Secrets (database passwords, fernet keys) never reach a compute-only node, whose kubelet
the node authorizer lets read the Secrets of the pods bound to it. The label is one only
osd can set (a kubelet may not set node-restriction.kubernetes.io/ labels on itself).
With .Values.node set (osd-lib.stateNode), also pins it to that node.
*/}}
{{- define "osd-lib.controlPlane" -}}
nodeSelector:
  node-restriction.kubernetes.io/openstack-control-plane: enabled
{{- with .ctx.Values.node }}
  kubernetes.io/hostname: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
Pins a pod that keeps its data in a hostPath to the node holding that data: (dict "ctx" $).
Renders a nodeSelector on kubernetes.io/hostname when .Values.node is set (the daemon
records the node when the workload is first placed), with the control role's label
(osd-lib.controlPlane) always.
*/}}
{{- define "osd-lib.stateNode" -}}
{{- include "osd-lib.controlPlane" . }}
{{- end -}}
