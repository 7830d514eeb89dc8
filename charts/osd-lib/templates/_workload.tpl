{{/*
The shapes every chart's workloads and Services share: the chart's labels, the immutable
selector (osd-lib.selectorLabels: never add to it) and the pod spec fields every osd pod has.
*/}}

{{/*
A Deployment, DaemonSet or StatefulSet: (dict "ctx" $ "name" "keystone-api" "component" "api"
"containers" (list ...)) and optionally:
  kind            Deployment (default), DaemonSet or StatefulSet
  namespace       metadata.namespace
  replicas        a Deployment's or StatefulSet's replicas (default .ctx.Values.replicas)
  serviceName     a StatefulSet's governing Service
  strategy        a Deployment's strategy, a DaemonSet's or StatefulSet's updateStrategy (a dict)
  checksum        the pod's checksum/config annotation
  annotations     further pod annotations (a dict)
  serviceLinks    true leaves enableServiceLinks out (else false: no service variables)
  hostNetwork     true: the host's network, cluster DNS still resolving (ClusterFirstWithHostNet)
  tolerations     (a list)
  nodeSelector    a dict instead of osd-lib.controlPlane (the control role's nodes, .Values.node);
                  "none" for no nodeSelector
  securityContext the pod's security context (a dict) instead of osd-lib.podSecurity's for
                  "uid" (the service user); "none" for none
  pod             further pod spec fields (a dict: serviceAccountName, dnsPolicy, ...)
  initContainers, volumes, volumeClaimTemplates (lists)
*/}}
{{- define "osd-lib.workload" -}}
{{- $kind := .kind | default "Deployment" -}}
apiVersion: apps/v1
kind: {{ $kind }}
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
spec:
  {{- with .serviceName }}
  serviceName: {{ . }}
  {{- end }}
  {{- if ne $kind "DaemonSet" }}
  replicas: {{ hasKey . "replicas" | ternary .replicas .ctx.Values.replicas }}
  {{- end }}
  {{- with .strategy }}
  {{ ternary "strategy" "updateStrategy" (eq $kind "Deployment") }}:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "osd-lib.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "osd-lib.labels" (dict "ctx" .ctx "component" .component) | nindent 8 }}
      {{- $annotations := deepCopy (.annotations | default dict) -}}
      {{- with .checksum }}
      {{- $_ := set $annotations "checksum/config" . }}
      {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- if not .serviceLinks }}
      enableServiceLinks: false
      {{- end }}
      {{- if .hostNetwork }}
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      {{- end }}
      {{- with .tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if eq (toString .nodeSelector) "none" }}
      {{- else if .nodeSelector }}
      nodeSelector:
        {{- toYaml .nodeSelector | nindent 8 }}
      {{- else }}
      {{- include "osd-lib.controlPlane" (dict "ctx" .ctx) | nindent 6 }}
      {{- end }}
      {{- if eq (toString .securityContext) "none" }}
      {{- else if .securityContext }}
      securityContext:
        {{- toYaml .securityContext | nindent 8 }}
      {{- else }}
      {{- include "osd-lib.podSecurity" (dict "uid" .uid) | nindent 6 }}
      {{- end }}
      {{- with .pod }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
      {{- with .initContainers }}
      initContainers:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        {{- toYaml .containers | nindent 8 }}
      {{- with .volumes }}
      volumes:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  {{- with .volumeClaimTemplates }}
  volumeClaimTemplates:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/*
A container of the workload's image: (dict "ctx" $ "image" "openstack" "name" "keystone"
"command" (list ...)) and optionally "ports" (a list), "probes" (a dict for osd-lib.probes)
or "probeSpec" (the probes as a dict), "resources" (the component under .Values.resources),
"securityContext", "env" (a list), "files" (config file to path, osd-lib.configMounts),
"mounts" (further volume mounts, a list). A list of one container, as YAML.
*/}}
{{- define "osd-lib.container" -}}
- name: {{ .name }}
  image: {{ include "osd-lib.image" . }}
  imagePullPolicy: Never
  command:
    {{- toYaml .command | nindent 4 }}
  {{- with .securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .ports }}
  ports:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .probes }}
  {{- include "osd-lib.probes" . | nindent 2 }}
  {{- end }}
  {{- with .probeSpec }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with .resources }}
  {{- include "osd-lib.resources" (dict "ctx" $.ctx "component" .) | nindent 2 }}
  {{- end }}
  {{- if or .files .mounts }}
  volumeMounts:
    {{- include "osd-lib.configMounts" . | nindent 4 }}
    {{- with .mounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end -}}

{{/*
A Service: (dict "ctx" $ "name" "keystone-api" "component" "api" "port" 5000) for one port
named "portName" (default api) with "nodePort", or "ports" (a list of dicts: name, port,
targetPort (default port), protocol, nodePort); optionally:
  selectorComponent  the component it selects when it differs from its labels' (default component)
  type               NodePort gives each port its nodePort; none given leaves the type out
  clusterIP, publishNotReadyAddresses, namespace, labels (further labels, a dict)
*/}}
{{- define "osd-lib.service" -}}
{{- $ports := .ports | default (list (dict "name" (.portName | default "api") "port" .port "nodePort" .nodePort)) -}}
{{- $nodePorts := eq (.type | default "") "NodePort" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "osd-lib.labels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
    {{- with .labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- with .type }}
  type: {{ . }}
  {{- end }}
  {{- with .clusterIP }}
  clusterIP: {{ . }}
  {{- end }}
  {{- if .publishNotReadyAddresses }}
  publishNotReadyAddresses: true
  {{- end }}
  selector:
    {{- include "osd-lib.selectorLabels" (dict "ctx" .ctx "component" (.selectorComponent | default .component)) | nindent 4 }}
  ports:
    {{- range $ports }}
    - name: {{ .name }}
      port: {{ .port }}
      {{- with .protocol }}
      protocol: {{ . }}
      {{- end }}
      targetPort: {{ .targetPort | default .port }}
      {{- if and $nodePorts .nodePort }}
      nodePort: {{ .nodePort }}
      {{- end }}
    {{- end }}
{{- end -}}

{{/*
The volume of a stateful service's data: (dict "ctx" $) and optionally "name" (default
data). The host directory .Values.persistence.hostPath when set (the pod is pinned to its
node, osd-lib.stateNode), else an emptyDir. A list of one volume, as YAML.
*/}}
{{- define "osd-lib.dataVolume" -}}
- name: {{ .name | default "data" }}
  {{- if .ctx.Values.persistence.hostPath }}
  hostPath:
    path: {{ .ctx.Values.persistence.hostPath }}
    type: DirectoryOrCreate
  {{- else }}
  emptyDir: {}
  {{- end }}
{{- end -}}
