# FSx for NetApp ONTAP, Multi-AZ: the shared WAL root every broker mounts over NFS 4.1
# (the chart's wal.mode nfs: server = nfs_dns_name, path = nfs_junction_path; or Trident).
resource "aws_fsx_ontap_file_system" "wal" {
  deployment_type                 = var.fsx_deployment_type
  storage_capacity                = var.fsx_storage_capacity_gib
  throughput_capacity             = var.fsx_throughput_capacity
  subnet_ids                      = [aws_subnet.weir[0].id, aws_subnet.weir[1].id]
  preferred_subnet_id             = aws_subnet.weir[0].id
  route_table_ids                 = var.route_table_ids
  security_group_ids              = [aws_security_group.fsx.id]
  fsx_admin_password              = var.fsx_admin_password
  automatic_backup_retention_days = 0 # the WAL only holds what is not in S3 yet
  tags                            = merge(local.tags, { Name = "${var.name}-weir-wal" })
}

resource "aws_fsx_ontap_storage_virtual_machine" "wal" {
  file_system_id             = aws_fsx_ontap_file_system.wal.id
  name                       = replace("${var.name}_weir", "-", "_")
  root_volume_security_style = "UNIX"
  tags                       = local.tags
}

resource "aws_fsx_ontap_volume" "wal" {
  name                       = "weir_wal"
  junction_path              = "/weir_wal"
  size_in_megabytes          = var.wal_volume_size_mib
  storage_virtual_machine_id = aws_fsx_ontap_storage_virtual_machine.wal.id
  security_style             = "UNIX"
  # Every fsync is on the produce path: no compression/dedupe work on it, and nothing
  # tiered to the capacity pool (its latency would be a produce's).
  storage_efficiency_enabled = false
  tiering_policy {
    name = "NONE"
  }
  # WAL segments live minutes; snapshots would keep deleted ones and fill the volume.
  snapshot_policy   = "none"
  skip_final_backup = true
  tags              = local.tags
}

locals {
  nfs_dns_name = aws_fsx_ontap_storage_virtual_machine.wal.endpoints[0].nfs[0].dns_name
  # The export itself is ONTAP configuration, which the FSx API (and so the AWS provider)
  # does not expose: an export policy allowing only the brokers' subnets, NFS 4.1, root
  # squashed, applied to the volume, whose root the brokers' uid owns. Run once over SSH
  # as fsxadmin on the file system's management endpoint (or the same through ONTAP's REST
  # API, or NetApp's netapp-ontap Terraform provider in a second stage).
  ontap_export_commands = join("\n", concat(
    [
      "vserver nfs modify -vserver ${aws_fsx_ontap_storage_virtual_machine.wal.name} -v4.1 enabled",
      "vserver export-policy create -vserver ${aws_fsx_ontap_storage_virtual_machine.wal.name} -policyname weir-brokers",
    ],
    [for i, s in var.subnets :
      "vserver export-policy rule create -vserver ${aws_fsx_ontap_storage_virtual_machine.wal.name} -policyname weir-brokers -ruleindex ${i + 1} -clientmatch ${s.cidr} -protocol nfs4 -rorule sys -rwrule sys -superuser none"
    ],
    [
      "volume modify -vserver ${aws_fsx_ontap_storage_virtual_machine.wal.name} -volume ${aws_fsx_ontap_volume.wal.name} -policy weir-brokers -user ${var.broker_uid} -group ${var.broker_uid} -unix-permissions 0700",
    ],
  ))
}
