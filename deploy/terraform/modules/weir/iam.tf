# The brokers' identity: the S3 actions Weir's object store uses (objectstore/s3:
# PutObject, GetObject and HeadObject, DeleteObject, ListObjectsV2 and HeadBucket) on its
# bucket and prefix, nothing else. Controllers need no AWS access.
locals {
  irsa      = var.eks_oidc_provider_arn != null
  oidc_host = local.irsa ? replace(element(split(":oidc-provider/", var.eks_oidc_provider_arn), 1), "https://", "") : ""
}

data "aws_iam_policy_document" "assume" {
  dynamic "statement" {
    for_each = local.irsa ? [1] : []
    content {
      actions = ["sts:AssumeRoleWithWebIdentity"]
      principals {
        type        = "Federated"
        identifiers = [var.eks_oidc_provider_arn]
      }
      condition {
        test     = "StringEquals"
        variable = "${local.oidc_host}:sub"
        values   = ["system:serviceaccount:${var.namespace}:${var.service_account}"]
      }
      condition {
        test     = "StringEquals"
        variable = "${local.oidc_host}:aud"
        values   = ["sts.amazonaws.com"]
      }
    }
  }
  dynamic "statement" {
    for_each = local.irsa ? [] : [1]
    content {
      actions = ["sts:AssumeRole"]
      principals {
        type        = "Service"
        identifiers = ["ec2.amazonaws.com"]
      }
    }
  }
}

resource "aws_iam_role" "broker" {
  name               = "${var.name}-weir-broker"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "broker" {
  statement {
    sid       = "List"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.objects.arn]
    dynamic "condition" {
      for_each = var.s3_prefix == "" ? [] : [1]
      content {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = ["${var.s3_prefix}*"]
      }
    }
  }
  statement {
    sid       = "Objects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.objects.arn}/${var.s3_prefix}*"]
  }
  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [1]
    content {
      sid       = "Kms"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
    }
  }
}

resource "aws_iam_role_policy" "broker" {
  name   = "weir-objects"
  role   = aws_iam_role.broker.id
  policy = data.aws_iam_policy_document.broker.json
}

resource "aws_iam_instance_profile" "broker" {
  count = local.irsa ? 0 : 1
  name  = "${var.name}-weir-broker"
  role  = aws_iam_role.broker.name
  tags  = local.tags
}
