variable "name" {
  description = "Name of the cluster: prefixes every resource (and the S3 bucket's name)."
  type        = string
}

variable "vpc_id" {
  description = "VPC the brokers, controllers and FSx file system live in."
  type        = string
}

variable "subnets" {
  description = "One private subnet per zone, three zones: the brokers' and controllers' subnets. FSx for ONTAP Multi-AZ uses the first two (preferred and standby); brokers in the third reach it across zones through its floating endpoint."
  type = list(object({
    az   = string
    cidr = string
  }))
  validation {
    condition     = length(var.subnets) == 3 && length(distinct([for s in var.subnets : s.az])) == 3
    error_message = "Weir is deployed over three zones: give three subnets in three distinct AZs."
  }
}

variable "route_table_ids" {
  description = "Route tables of the subnets: FSx Multi-AZ adds routes to its floating endpoint, and the S3 gateway endpoint is attached to them."
  type        = list(string)
}

variable "client_cidrs" {
  description = "Networks of the Kafka clients (the Kafka and zone listener ports are opened to them)."
  type        = list(string)
}

variable "admin_cidrs" {
  description = "Networks allowed to the controller API (weir admin) and to FSx's management endpoint (ONTAP CLI, for the export policy)."
  type        = list(string)
  default     = []
}

variable "monitoring_cidrs" {
  description = "Networks of Prometheus (the metrics port of brokers and controllers)."
  type        = list(string)
  default     = []
}

variable "ports" {
  description = "The ports Weir listens on: the chart's defaults (values.yaml broker.* and controller.*)."
  type = object({
    kafka          = number # --listen
    zone_listeners = number # first --zone-listener port; one per zone
    gossip         = number # --gossip-addr, TCP and UDP
    metrics        = number # --metrics, brokers and controllers
    raft           = number # controller --raft-addr
    controller_api = number # controller --api-addr
  })
  default = {
    kafka          = 9092
    zone_listeners = 9093
    gossip         = 7946
    metrics        = 9644
    raft           = 9301
    controller_api = 9401
  }
}

# FSx for ONTAP: the shared WAL root.

variable "fsx_deployment_type" {
  description = "MULTI_AZ_1 or MULTI_AZ_2: a file server in each of two zones, failing over between them (the WAL survives a zone's loss)."
  type        = string
  default     = "MULTI_AZ_1"
  validation {
    condition     = startswith(var.fsx_deployment_type, "MULTI_AZ")
    error_message = "The WAL must survive a zone's loss: use a Multi-AZ deployment type."
  }
}

variable "fsx_storage_capacity_gib" {
  description = "SSD capacity of the file system (GiB, at least 1024). Size it from the WAL: brokers x --wal-max-bytes with headroom (docs/OPERATIONS.md, sizing)."
  type        = number
  default     = 1024
}

variable "fsx_throughput_capacity" {
  description = "Throughput capacity (MB/s): every produced byte is written once and read back once by the uploader, plus failover tails (docs/OPERATIONS.md, sizing)."
  type        = number
  default     = 384
}

variable "fsx_admin_password" {
  description = "Password of fsxadmin (the ONTAP CLI/REST user, used once to set the export policy). Null: set it later in the console."
  type        = string
  default     = null
  sensitive   = true
}

variable "wal_volume_size_mib" {
  description = "Size of the WAL volume (MiB)."
  type        = number
  default     = 921600
}

variable "broker_uid" {
  description = "The uid (and gid) every Weir process runs as (the chart's securityContext.runAsUser): owns the WAL volume's root."
  type        = number
  default     = 65532
}

# S3: the object tier.

variable "bucket_name" {
  description = "S3 bucket name; null: \"<name>-weir-objects\"."
  type        = string
  default     = null
}

variable "s3_prefix" {
  description = "Key prefix inside the bucket the brokers are allowed (the chart's s3.prefix, --s3-prefix); empty: the whole bucket."
  type        = string
  default     = ""
}

variable "kms_key_arn" {
  description = "KMS key for the bucket's default encryption; null: SSE-S3 (AES256)."
  type        = string
  default     = null
}

variable "noncurrent_version_days" {
  description = "Days a deleted or overwritten object's old version is kept (versioning is on, so an operator's mistake can be undone); Weir itself deletes objects it no longer needs."
  type        = number
  default     = 7
}

variable "create_s3_endpoint" {
  description = "Create an S3 gateway endpoint on route_table_ids, so uploads and reads do not cross a NAT gateway."
  type        = bool
  default     = true
}

# IAM: who the brokers are.

variable "eks_oidc_provider_arn" {
  description = "The EKS cluster's IAM OIDC provider ARN: the broker role trusts the chart's service account through it (IRSA). Null: the role is for EC2 instances (an instance profile)."
  type        = string
  default     = null
}

variable "namespace" {
  description = "Kubernetes namespace of the Helm release (IRSA trust)."
  type        = string
  default     = "weir"
}

variable "service_account" {
  description = "The chart's service account (serviceAccount.name; default: the release's full name, e.g. \"prod-weir\")."
  type        = string
  default     = "weir"
}

variable "tags" {
  description = "Tags on every resource."
  type        = map(string)
  default     = {}
}
