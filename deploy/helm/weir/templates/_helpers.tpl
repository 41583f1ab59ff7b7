{{/* The release's full name, cut to leave room for the suffixes below. */}}
{{- define "weir.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 30 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 30 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "weir.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "weir.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "weir.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "weir.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "weir.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "weir.controllerHeadless" -}}{{ include "weir.fullname" . }}-controller-headless{{- end -}}
{{- define "weir.brokerHeadless" -}}{{ include "weir.fullname" . }}-broker-headless{{- end -}}

{{/* The DNS name of controller ID $id: its pod under the headless Service. */}}
{{- define "weir.controllerHost" -}}
{{- $ := index . 0 -}}{{- $id := index . 1 -}}
{{ include "weir.fullname" $ }}-controller-{{ $id }}.{{ include "weir.controllerHeadless" $ }}.{{ $.Release.Namespace }}.svc.{{ $.Values.clusterDomain }}
{{- end -}}

{{/* --peers: "1=host:raft/host:api,2=..." for IDs 1..replicas, the same on every controller. */}}
{{- define "weir.controllerPeers" -}}
{{- $ := . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.controller.replicas) -}}
{{- $host := include "weir.controllerHost" (list $ (add1 $i)) -}}
{{- $out = append $out (printf "%d=%s:%d/%s:%d" (add1 $i) $host (int $.Values.controller.raftPort) $host (int $.Values.controller.apiPort)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* --controllers: every controller's API address. */}}
{{- define "weir.controllerAddrs" -}}
{{- $ := . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.controller.replicas) -}}
{{- $out = append $out (printf "%s:%d" (include "weir.controllerHost" (list $ (add1 $i))) (int $.Values.controller.apiPort)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* A zone's first broker ID: its idBase, else 100 x (position + 1). */}}
{{- define "weir.zoneIdBase" -}}
{{- $zone := index . 0 -}}{{- $i := index . 1 -}}
{{- if hasKey $zone "idBase" }}{{ int $zone.idBase }}{{ else }}{{ mul 100 (add1 $i) }}{{ end -}}
{{- end -}}

{{- define "weir.brokerStatefulSet" -}}
{{- $ := index . 0 -}}{{- $zone := index . 1 -}}
{{ include "weir.fullname" $ }}-broker-{{ $zone.name }}
{{- end -}}

{{/* Gossip seeds: the first broker of every zone. */}}
{{- define "weir.gossipSeeds" -}}
{{- $ := . -}}
{{- $out := list -}}
{{- range $i, $zone := .Values.broker.zones -}}
{{- $out = append $out (printf "%s-%s.%s.%s.svc.%s:%d" (include "weir.brokerStatefulSet" (list $ $zone)) (include "weir.zoneIdBase" (list $zone $i)) (include "weir.brokerHeadless" $) $.Release.Namespace $.Values.clusterDomain (int $.Values.broker.gossipPort)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* The Kafka listeners' security protocol from tls.kafka and sasl. */}}
{{- define "weir.kafkaProtocol" -}}
{{- if and .Values.tls.kafka.enabled .Values.sasl.enabled -}}SASL_SSL
{{- else if .Values.tls.kafka.enabled -}}SSL
{{- else if .Values.sasl.enabled -}}SASL_PLAINTEXT
{{- else -}}PLAINTEXT
{{- end -}}
{{- end -}}

{{/* Flags every process that calls the controller API shares (brokers, weir admin). */}}
{{- define "weir.controllerClientArgs" -}}
- --controllers={{ include "weir.controllerAddrs" . }}
{{- if .Values.clusterToken.secretName }}
- --cluster-token-file=/etc/weir/token/{{ .Values.clusterToken.key }}
{{- if not .Values.tls.controller.enabled }}
- --insecure-plaintext-token
{{- end }}
{{- end }}
{{- if .Values.tls.controller.enabled }}
- --controller-tls-ca=/etc/weir/controller-tls/ca.crt
{{- end }}
{{- end -}}

{{/* Refuses values that would render a cluster that cannot start or is unsafe. */}}
{{- define "weir.validate" -}}
{{- if and .Values.clusterToken.secretName (not .Values.tls.controller.enabled) (not .Values.clusterToken.allowPlaintext) -}}
{{- fail "clusterToken without tls.controller.enabled sends the token in the clear: enable controller TLS or set clusterToken.allowPlaintext" -}}
{{- end -}}
{{- if lt (int .Values.controller.replicas) 1 -}}
{{- fail "controller.replicas must be at least 1 (3 or 5 for a quorum that survives a loss)" -}}
{{- end -}}
{{- if eq (len .Values.broker.zones) 0 -}}
{{- fail "broker.zones must list at least one zone" -}}
{{- end -}}
{{- if and (eq .Values.wal.mode "nfs") (not .Values.wal.nfs.server) -}}
{{- fail "wal.mode nfs needs wal.nfs.server (the SVM's NFS DNS name)" -}}
{{- end -}}
{{- if and (eq .Values.wal.mode "existingClaim") (not .Values.wal.existingClaim) -}}
{{- fail "wal.mode existingClaim needs wal.existingClaim" -}}
{{- end -}}
{{- if not (has .Values.wal.mode (list "storageClass" "nfs" "existingClaim")) -}}
{{- fail "wal.mode must be storageClass, nfs or existingClaim" -}}
{{- end -}}
{{- if and .Values.tls.kafka.enabled (not .Values.tls.kafka.secretName) -}}
{{- fail "tls.kafka.enabled needs tls.kafka.secretName" -}}
{{- end -}}
{{- if and .Values.tls.controller.enabled (not .Values.tls.controller.secretName) -}}
{{- fail "tls.controller.enabled needs tls.controller.secretName" -}}
{{- end -}}
{{- end -}}

{{- define "weir.walClaim" -}}
{{- if eq .Values.wal.mode "existingClaim" -}}{{ .Values.wal.existingClaim }}{{- else -}}{{ include "weir.fullname" . }}-wal{{- end -}}
{{- end -}}
