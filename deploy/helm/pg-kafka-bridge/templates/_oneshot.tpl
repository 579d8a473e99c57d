{{/* The pod spec of a one-shot bridge command (the `helm test` check, the verify CronJob):
the release's image, config and credentials, the bridge's security context. Takes a dict:
root (the chart's context), name (container), args, resources (empty: the bridge's),
tmpSizeLimit (of /tmp; empty: tmp.sizeLimit). */}}
{{- define "pg-kafka-bridge.oneShotPodSpec" -}}
{{- $root := .root }}
{{- $credentialEnv := include "pg-kafka-bridge.credentialEnv" $root | trim }}
restartPolicy: Never
serviceAccountName: {{ include "pg-kafka-bridge.serviceAccountName" $root }}
automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
containers:
  - name: {{ .name }}
    image: "{{ $root.Values.image.repository }}:{{ $root.Values.image.tag | default $root.Chart.AppVersion }}"
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    args: {{ toJson .args }}
    {{- if or $credentialEnv $root.Values.extraEnv }}
    env:
      {{- with $credentialEnv }}
      {{- . | nindent 6 }}
      {{- end }}
      {{- with $root.Values.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- end }}
    {{- with $root.Values.extraEnvFrom }}
    envFrom:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    securityContext:
      {{- toYaml $root.Values.securityContext | nindent 6 }}
    resources:
      {{- toYaml (.resources | default $root.Values.resources) | nindent 6 }}
    volumeMounts:
      - name: config
        mountPath: /etc/bridge
        readOnly: true
      - name: tmp
        mountPath: /tmp
      {{- with $root.Values.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
volumes:
  - name: config
    configMap:
      name: {{ include "pg-kafka-bridge.fullname" $root }}
  - name: tmp
    emptyDir:
      sizeLimit: {{ .tmpSizeLimit | default $root.Values.tmp.sizeLimit }}
  {{- with $root.Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
