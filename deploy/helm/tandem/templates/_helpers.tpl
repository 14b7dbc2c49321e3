{{- /*
The names and labels of the objects. Names are fixed (tandem-controller, tandem-router, as
`tandem manifests` has them): the CRDs and ClusterRoles are cluster-wide, so a cluster holds one
Tandem release. Selector labels are the two Tandem labels only, so a Deployment installed with
kubectl can be taken over by the chart; the Helm labels go on object metadata, not pod templates.
*/ -}}

{{- define "tandem.selectorLabels" -}}
app.kubernetes.io/name: tandem
app.kubernetes.io/component: {{ . }}
{{- end }}

{{- /* Object labels: the selector labels of component .component, and Helm's own. */ -}}
{{- define "tandem.labels" -}}
{{ include "tandem.selectorLabels" .component }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- end }}

{{- define "tandem.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- /* --namespace=NS under a namespace scope, as a YAML list item. */ -}}
{{- define "tandem.scopeArgs" -}}
{{- with .Values.watchNamespace }}
- --namespace={{ . }}
{{- end }}
{{- end }}

{{- /*
A component's roles and bindings (rules from _rules.tpl, generated from the code's permissions):
its ClusterRole, its Role in the release namespace and, under a namespace scope, its Role
<name>-watched in the watched namespace; a role without rules is left out. Arguments: root,
component ("controller", "router" or "dashboard"), name, serviceAccount (empty: the roles are left
unbound, as the dashboard users' are).
*/ -}}
{{- define "tandem.rbac" -}}
{{- $root := .root }}
{{- $subject := dict "kind" "ServiceAccount" "name" .serviceAccount "namespace" $root.Release.Namespace }}
{{- $clusterRole := ternary "clusterRole" "scopedClusterRole" (empty $root.Values.watchNamespace) }}
{{- $roles := list (dict "kind" "ClusterRole" "name" .name "namespace" "" "rules" $clusterRole) (dict "kind" "Role" "name" .name "namespace" $root.Release.Namespace "rules" "installRole") }}
{{- with $root.Values.watchNamespace }}
{{- $roles = append $roles (dict "kind" "Role" "name" (printf "%s-watched" $.name) "namespace" . "rules" "watchedRole") }}
{{- end }}
{{- range $roles }}
{{- $rules := include (printf "tandem.rules.%s.%s" $.component .rules) $root }}
{{- if $rules }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ .kind }}
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "tandem.labels" (dict "root" $root "component" $.component) | nindent 4 }}
rules:
  {{- $rules | nindent 2 }}
{{- if $.serviceAccount }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ .kind }}Binding
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "tandem.labels" (dict "root" $root "component" $.component) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ .kind }}
  name: {{ .name }}
subjects:
  - {{- toYaml $subject | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- /* A component's ServiceAccount when .create. Arguments: root, component, serviceAccount (its values). */ -}}
{{- define "tandem.serviceAccount" -}}
{{- if .serviceAccount.create }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .serviceAccount.name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "tandem.labels" (dict "root" .root "component" .component) | nindent 4 }}
  {{- with .serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{- /*
A component's pod template metadata: its selector labels, and annotations — the Prometheus ones
when metrics.enabled, then podAnnotations. Arguments: root, component, port, podAnnotations.
*/ -}}
{{- define "tandem.podMetadata" -}}
labels:
  {{- include "tandem.selectorLabels" .component | nindent 2 }}
{{- $annotations := dict }}
{{- if .root.Values.metrics.enabled }}
{{- $annotations = dict "prometheus.io/scrape" "true" "prometheus.io/port" (toString .port) "prometheus.io/path" "/metrics" }}
{{- end }}
{{- $annotations = merge (deepCopy .podAnnotations) $annotations }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- /*
What both pods share: scheduling, pull secrets, the pod security context. Arguments: root, values
(the component's values).
*/ -}}
{{- define "tandem.podScheduling" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
terminationGracePeriodSeconds: 30
{{- end }}

{{- /* The container's probes and security context (both components). */ -}}
{{- define "tandem.containerCommon" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 3
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop:
      - ALL
{{- end }}
