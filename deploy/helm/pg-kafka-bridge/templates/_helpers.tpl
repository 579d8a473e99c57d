{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "pg-kafka-bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart unless the release name already holds it. */}}
{{- define "pg-kafka-bridge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pg-kafka-bridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pg-kafka-bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pg-kafka-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pg-kafka-bridge.labels" -}}
helm.sh/chart: {{ include "pg-kafka-bridge.chart" . }}
{{ include "pg-kafka-bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pg-kafka-bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pg-kafka-bridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The port the bridge serves /metrics, /healthz and /readyz on (config.http.port). */}}
{{- define "pg-kafka-bridge.httpPort" -}}
{{- dig "http" "port" 9187 .Values.config | int }}
{{- end }}

{{/* Where spill files go: config.pipeline.spill_dir, else the bridge's own default. */}}
{{- define "pg-kafka-bridge.spillDir" -}}
{{- dig "pipeline" "spill_dir" "/tmp/bridge-spill" .Values.config }}
{{- end }}

{{- define "pg-kafka-bridge.shutdownTimeout" -}}
{{- dig "pipeline" "shutdown_timeout_s" 30 .Values.config | float64 }}
{{- end }}

{{/* Grace period: explicit, or the bridge's shutdown timeout plus 15 s for the flush. */}}
{{- define "pg-kafka-bridge.terminationGracePeriod" -}}
{{- $shutdown := include "pg-kafka-bridge.shutdownTimeout" . | float64 }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add (ceil $shutdown | int) 15 }}
{{- else }}
{{- $grace := .Values.terminationGracePeriodSeconds | int }}
{{- if le (float64 $grace) $shutdown }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed config.pipeline.shutdown_timeout_s (%v), or the pod is killed before it confirms its last LSN" $grace $shutdown) }}
{{- end }}
{{- $grace }}
{{- end }}
{{- end }}

{{/* True (non-empty) when the chart must create the credentials Secret. */}}
{{- define "pg-kafka-bridge.createSecret" -}}
{{- $a := .Values.auth }}
{{- if and (not $a.existingSecret) (or $a.postgresPassword $a.kafkaSaslPassword $a.registryPassword) }}true{{ end }}
{{- end }}

{{- define "pg-kafka-bridge.secretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "pg-kafka-bridge.fullname" .)) }}
{{- end }}

{{/*
Credential mapping: env var the bridge reads, key in the chart-made Secret,
the value holding the password, the existingSecretKeys entry naming its key.
*/}}
{{- define "pg-kafka-bridge.credentials" -}}
- env: BRIDGE_SOURCE__PASSWORD
  key: postgres-password
  value: postgresPassword
- env: BRIDGE_KAFKA__SASL_PASSWORD
  key: kafka-sasl-password
  value: kafkaSaslPassword
- env: BRIDGE_REGISTRY__BASIC_AUTH_PASSWORD
  key: registry-password
  value: registryPassword
{{- end }}

{{/* Env entries reading the credentials from the Secret, never from the ConfigMap. */}}
{{- define "pg-kafka-bridge.credentialEnv" -}}
{{- $a := .Values.auth }}
{{- $secret := include "pg-kafka-bridge.secretName" . }}
{{- range (include "pg-kafka-bridge.credentials" . | fromYamlArray) }}
{{- $key := "" }}
{{- if $a.existingSecret }}
{{- $key = get $a.existingSecretKeys .value }}
{{- else if get $a .value }}
{{- $key = .key }}
{{- end }}
{{- if $key }}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
{{- end }}
{{- end }}
{{- end }}

{{/* Refuse combinations that would deploy something other than what was asked. */}}
{{- define "pg-kafka-bridge.validate" -}}
{{- $a := .Values.auth }}
{{- if and $a.existingSecret (or $a.postgresPassword $a.kafkaSaslPassword $a.registryPassword) }}
{{- fail "auth: set either existingSecret or the passwords, not both (the passwords would be ignored)" }}
{{- end }}
{{- $spill := include "pg-kafka-bridge.spillDir" . | clean }}
{{- if or (eq $spill "/tmp") (eq $spill "/etc/bridge") (hasPrefix "/etc/bridge/" $spill) (not (isAbs $spill)) }}
{{- fail (printf "config.pipeline.spill_dir (%s) must be an absolute path other than /tmp and outside /etc/bridge (an emptyDir is mounted there)" $spill) }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and (include "pg-kafka-bridge.pdbEnabled" .) (include "pg-kafka-bridge.pdbMinAvailable" .) (include "pg-kafka-bridge.pdbMaxUnavailable" .) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" }}
{{- end }}
{{- if and (include "pg-kafka-bridge.pair" .) (eq (toString (dig "kafka" "exactly_once" true .Values.config)) "false") }}
{{- fail "replicaCount 2 needs config.kafka.exactly_once (the transactional id fences a paused old active; docs/operations/high-availability.md): leave it unset or true" }}
{{- end }}
{{- if and (include "pg-kafka-bridge.pair" .) (eq (toString (dig "ha" "enabled" true .Values.config)) "false") }}
{{- fail "replicaCount 2 is an active bridge and a standby: leave config.ha.enabled unset or true" }}
{{- end }}
{{- if and .Values.prometheusRule.enabled (not (and .Values.verify.enabled .Values.verify.pushGateway)) }}
{{- fail "prometheusRule alerts on verify's pushed metrics: enable verify and set verify.pushGateway" }}
{{- end }}
{{- end }}

{{/* PDB bounds as strings, empty when unset (absent or null). */}}
{{- define "pg-kafka-bridge.pdbMinAvailable" -}}
{{- $v := get .Values.podDisruptionBudget "minAvailable" }}
{{- if not (kindIs "invalid" $v) }}{{ $v }}{{ end }}
{{- end }}

{{- define "pg-kafka-bridge.pdbMaxUnavailable" -}}
{{- $v := get .Values.podDisruptionBudget "maxUnavailable" }}
{{- if not (kindIs "invalid" $v) }}{{ $v }}{{ end }}
{{- end }}

{{/* Non-empty for an active/standby pair (replicaCount 2). */}}
{{- define "pg-kafka-bridge.pair" -}}
{{- if eq (int .Values.replicaCount) 2 }}true{{ end }}
{{- end }}

{{/* Non-empty when the PDB is rendered: explicitly enabled, or by default for a pair. */}}
{{- define "pg-kafka-bridge.pdbEnabled" -}}
{{- $on := .Values.podDisruptionBudget.enabled }}
{{- if kindIs "invalid" $on }}{{ include "pg-kafka-bridge.pair" . }}{{ else if $on }}true{{ end }}
{{- end }}

{{/* The bridge's configuration: `config`, plus what a pair needs (ha, exactly-once). */}}
{{- define "pg-kafka-bridge.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if include "pg-kafka-bridge.pair" . }}
{{- $_ := set $config "ha" (merge (dict "enabled" true) (get $config "ha" | default dict)) }}
{{- $_ := set $config "kafka" (merge (dict "exactly_once" true) (get $config "kafka" | default dict)) }}
{{- end }}
{{- toYaml $config }}
{{- end }}
