# What the Helm chart (deploy/helm/weir) needs, named after its values.

output "bucket_name" {
  description = "s3.bucket"
  value       = aws_s3_bucket.objects.bucket
}

output "s3_prefix" {
  description = "s3.prefix"
  value       = var.s3_prefix
}

output "region" {
  description = "s3.region"
  value       = data.aws_region.current.name
}

output "nfs_dns_name" {
  description = "wal.nfs.server: the SVM's NFS endpoint (a floating address that follows the file server across zones)"
  value       = local.nfs_dns_name
}

output "nfs_junction_path" {
  description = "wal.nfs.path"
  value       = aws_fsx_ontap_volume.wal.junction_path
}

output "broker_role_arn" {
  description = "serviceAccount.annotations[eks.amazonaws.com/role-arn] (IRSA), or the instance profile's role on EC2"
  value       = aws_iam_role.broker.arn
}

output "broker_instance_profile" {
  description = "The instance profile of EC2 brokers (null with IRSA)"
  value       = local.irsa ? null : aws_iam_instance_profile.broker[0].name
}

output "zones" {
  description = "broker.zones[*].name, in order"
  value       = local.zones
}

output "subnet_ids" {
  description = "The brokers' and controllers' subnets, one per zone, in the order of zones"
  value       = aws_subnet.weir[*].id
}

output "broker_security_group_id" {
  value = aws_security_group.broker.id
}

output "controller_security_group_id" {
  value = aws_security_group.controller.id
}

output "fsx_management_dns_name" {
  description = "Where to run ontap_export_commands (ssh fsxadmin@...)"
  value       = aws_fsx_ontap_file_system.wal.endpoints[0].management[0].dns_name
}

output "ontap_export_commands" {
  description = "ONTAP CLI commands that export the WAL volume to the brokers' subnets only (NFS 4.1, root squashed, root owned by the brokers' uid)"
  value       = local.ontap_export_commands
}
