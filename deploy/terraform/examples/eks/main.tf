# Weir on an existing EKS cluster: the module's subnets, FSx for ONTAP Multi-AZ, S3 and the
# brokers' IRSA role, then the Helm chart installed with the module's outputs. Apply in two
# steps: `terraform apply -target=module.weir`, run the module's ontap_export_commands on
# the file system (ssh fsxadmin@<fsx_management_dns_name>), then `terraform apply`.
terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.60"
    }
    helm = {
      source  = "hashicorp/helm"
      version = "~> 2.17"
    }
  }
}

provider "aws" {
  region = var.region
}

data "aws_eks_cluster" "this" {
  name = var.eks_cluster_name
}

data "aws_eks_cluster_auth" "this" {
  name = var.eks_cluster_name
}

provider "helm" {
  kubernetes {
    host                   = data.aws_eks_cluster.this.endpoint
    cluster_ca_certificate = base64decode(data.aws_eks_cluster.this.certificate_authority[0].data)
    token                  = data.aws_eks_cluster_auth.this.token
  }
}

locals {
  release         = "prod"
  namespace       = "streaming"
  service_account = "${local.release}-weir" # the chart's default: the release's full name
}

module "weir" {
  source = "../../modules/weir"

  name            = var.name
  vpc_id          = data.aws_eks_cluster.this.vpc_config[0].vpc_id
  subnets         = var.subnets
  route_table_ids = var.route_table_ids
  client_cidrs    = var.client_cidrs
  admin_cidrs     = var.admin_cidrs

  monitoring_cidrs   = var.client_cidrs
  fsx_admin_password = var.fsx_admin_password
  s3_prefix          = "weir/${var.name}/"

  eks_oidc_provider_arn = var.eks_oidc_provider_arn
  namespace             = local.namespace
  service_account       = local.service_account
}

# The chart, wired to the module: bucket, region and prefix, the WAL's NFS endpoint, the
# IRSA role, and one broker StatefulSet per zone of the module's subnets.
locals {
  chart_values = {
    "s3.bucket"                                                 = module.weir.bucket_name
    "s3.region"                                                 = module.weir.region
    "s3.prefix"                                                 = module.weir.s3_prefix
    "wal.mode"                                                  = "nfs"
    "wal.nfs.server"                                            = module.weir.nfs_dns_name
    "wal.nfs.path"                                              = module.weir.nfs_junction_path
    "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn" = module.weir.broker_role_arn
  }
}

resource "helm_release" "weir" {
  name             = local.release
  namespace        = local.namespace
  create_namespace = true
  chart            = "${path.module}/../../../helm/weir"
  values           = [file("${path.module}/../../../helm/weir/examples/production.yaml")]

  dynamic "set" {
    for_each = local.chart_values
    content {
      name  = set.key
      value = set.value
    }
  }
  dynamic "set" {
    for_each = module.weir.zones
    content {
      name  = "broker.zones[${set.key}].name"
      value = set.value
    }
  }
}
