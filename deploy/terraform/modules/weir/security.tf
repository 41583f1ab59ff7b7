# Security groups that open only what Weir listens on. Brokers: Kafka (clients and the
# other brokers' links, which use the Kafka listener) and the zone listeners, gossip (TCP
# and UDP, brokers only), metrics. Controllers: Raft (controllers only), the API (brokers
# and admins), metrics. FSx: NFS (2049/TCP; NFS 4.1 needs no portmapper or mountd) from
# the brokers, and its management endpoint from admins. On EKS, attach the broker and
# controller groups to the node groups that run them (or use security groups for pods).
# Egress stays open: S3 (gateway endpoint), STS for IRSA, FSx, each other.

resource "aws_security_group" "broker" {
  name        = "${var.name}-weir-broker"
  description = "Weir brokers"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_security_group" "controller" {
  name        = "${var.name}-weir-controller"
  description = "Weir controllers"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_security_group" "fsx" {
  name        = "${var.name}-weir-fsx"
  description = "FSx for ONTAP: the Weir WAL"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

locals {
  kafka_to = var.ports.zone_listeners + length(var.subnets) - 1
}

resource "aws_vpc_security_group_ingress_rule" "kafka_clients" {
  for_each          = toset(var.client_cidrs)
  security_group_id = aws_security_group.broker.id
  description       = "Kafka and zone listeners from clients"
  ip_protocol       = "tcp"
  from_port         = var.ports.kafka
  to_port           = local.kafka_to
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "kafka_brokers" {
  security_group_id            = aws_security_group.broker.id
  description                  = "Kafka listeners from other brokers (zone proxy links, read replicas)"
  ip_protocol                  = "tcp"
  from_port                    = var.ports.kafka
  to_port                      = local.kafka_to
  referenced_security_group_id = aws_security_group.broker.id
}

resource "aws_vpc_security_group_ingress_rule" "gossip" {
  for_each                     = toset(["tcp", "udp"])
  security_group_id            = aws_security_group.broker.id
  description                  = "memberlist gossip between brokers"
  ip_protocol                  = each.value
  from_port                    = var.ports.gossip
  to_port                      = var.ports.gossip
  referenced_security_group_id = aws_security_group.broker.id
}

resource "aws_vpc_security_group_ingress_rule" "raft" {
  security_group_id            = aws_security_group.controller.id
  description                  = "Raft between controllers"
  ip_protocol                  = "tcp"
  from_port                    = var.ports.raft
  to_port                      = var.ports.raft
  referenced_security_group_id = aws_security_group.controller.id
}

resource "aws_vpc_security_group_ingress_rule" "api_brokers" {
  for_each                     = { broker = aws_security_group.broker.id, controller = aws_security_group.controller.id }
  security_group_id            = aws_security_group.controller.id
  description                  = "controller API from ${each.key}s (heartbeats, metadata, forwarding)"
  ip_protocol                  = "tcp"
  from_port                    = var.ports.controller_api
  to_port                      = var.ports.controller_api
  referenced_security_group_id = each.value
}

resource "aws_vpc_security_group_ingress_rule" "api_admins" {
  for_each          = toset(var.admin_cidrs)
  security_group_id = aws_security_group.controller.id
  description       = "controller API from admins (weir admin)"
  ip_protocol       = "tcp"
  from_port         = var.ports.controller_api
  to_port           = var.ports.controller_api
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "metrics" {
  for_each = {
    for pair in setproduct(["broker", "controller"], var.monitoring_cidrs) : "${pair[0]}-${pair[1]}" => pair
  }
  security_group_id = each.value[0] == "broker" ? aws_security_group.broker.id : aws_security_group.controller.id
  description       = "/metrics, /healthz, /readyz from Prometheus"
  ip_protocol       = "tcp"
  from_port         = var.ports.metrics
  to_port           = var.ports.metrics
  cidr_ipv4         = each.value[1]
}

resource "aws_vpc_security_group_ingress_rule" "nfs" {
  security_group_id            = aws_security_group.fsx.id
  description                  = "NFS 4.1 from brokers (the WAL root)"
  ip_protocol                  = "tcp"
  from_port                    = 2049
  to_port                      = 2049
  referenced_security_group_id = aws_security_group.broker.id
}

resource "aws_vpc_security_group_ingress_rule" "fsx_management" {
  for_each          = toset(var.admin_cidrs)
  security_group_id = aws_security_group.fsx.id
  description       = "ONTAP CLI (SSH) for the export policy"
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_egress_rule" "all" {
  for_each          = { broker = aws_security_group.broker.id, controller = aws_security_group.controller.id }
  security_group_id = each.value
  description       = "S3, STS, FSx, the other Weir processes"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
}
