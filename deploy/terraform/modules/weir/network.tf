data "aws_region" "current" {}

locals {
  zones = [for s in var.subnets : s.az]
  tags  = merge({ "weir.io/cluster" = var.name }, var.tags)
}

# One private subnet per zone: the brokers of a zone (the chart's broker.zones[i], one
# StatefulSet per zone) and a controller run here.
resource "aws_subnet" "weir" {
  count             = length(var.subnets)
  vpc_id            = var.vpc_id
  availability_zone = var.subnets[count.index].az
  cidr_block        = var.subnets[count.index].cidr
  tags              = merge(local.tags, { Name = "${var.name}-weir-${var.subnets[count.index].az}" })
}

resource "aws_route_table_association" "weir" {
  count          = length(var.subnets)
  subnet_id      = aws_subnet.weir[count.index].id
  route_table_id = var.route_table_ids[count.index % length(var.route_table_ids)]
}

# Uploads and object reads stay inside the VPC (no NAT gateway charges per GB).
resource "aws_vpc_endpoint" "s3" {
  count             = var.create_s3_endpoint ? 1 : 0
  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${data.aws_region.current.name}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = var.route_table_ids
  tags              = merge(local.tags, { Name = "${var.name}-weir-s3" })
}
