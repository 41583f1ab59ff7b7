variable "name" {
  description = "Cluster name (prefixes resources)."
  type        = string
  default     = "prod"
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "eks_cluster_name" {
  description = "The existing EKS cluster Weir runs on."
  type        = string
}

variable "eks_oidc_provider_arn" {
  description = "The cluster's IAM OIDC provider (IRSA)."
  type        = string
}

variable "subnets" {
  description = "Weir's subnets, one per zone, inside the cluster's VPC."
  type = list(object({
    az   = string
    cidr = string
  }))
  default = [
    { az = "us-east-1a", cidr = "10.0.96.0/22" },
    { az = "us-east-1b", cidr = "10.0.100.0/22" },
    { az = "us-east-1c", cidr = "10.0.104.0/22" },
  ]
}

variable "route_table_ids" {
  description = "The private route tables of the cluster's VPC."
  type        = list(string)
}

variable "client_cidrs" {
  description = "Where Kafka clients run (the VPC's CIDR, typically)."
  type        = list(string)
  default     = ["10.0.0.0/16"]
}

variable "admin_cidrs" {
  type    = list(string)
  default = []
}

variable "fsx_admin_password" {
  type      = string
  sensitive = true
}
