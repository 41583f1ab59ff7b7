output "ontap_export_commands" {
  description = "Run these as fsxadmin on fsx_management_dns_name before the brokers start."
  value       = module.weir.ontap_export_commands
}

output "fsx_management_dns_name" {
  value = module.weir.fsx_management_dns_name
}

output "bootstrap" {
  value = "${local.release}-weir-kafka.${local.namespace}.svc:9092"
}
