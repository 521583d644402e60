/*
 * What the files of config/ share and nothing outside uses: the validators
 * of config_checks.c, named by the key tables of config_schema.c. Each
 * matches gw_config_check (config_schema.h).
 */
#ifndef GW_CONFIG_INT_H
#define GW_CONFIG_INT_H

const char *gw__config_check_nonempty(void *field);
const char *gw__config_check_opus_rate(void *field);
const char *gw__config_check_name(void *field);
const char *gw__config_check_url(void *field);
const char *gw__config_check_http_url(void *field);
const char *gw__config_check_optional_http_url(void *field);
const char *gw__config_check_mcp_server_url(void *field);
const char *gw__config_check_header_value(void *field);
const char *gw__config_check_level_topic(void *field);
const char *gw__config_check_status_topic(void *field);
const char *gw__config_check_cluster_prefix(void *field);
const char *gw__config_check_cluster_name(void *field);
const char *gw__config_check_down_topic(void *field);
const char *gw__config_check_mac(void *field);
const char *gw__config_check_client_id(void *field);
const char *gw__config_check_group(void *field);
const char *gw__config_check_manager_key(void *field);
const char *gw__config_check_origin(void *field);
const char *gw__config_check_ui_dir(void *field);
const char *gw__config_check_host(void *field);
const char *gw__config_check_ota_endpoint(void *field);
const char *gw__config_check_ota_group(void *field);
const char *gw__config_check_publish_topic(void *field);
const char *gw__config_check_serial_key(void *field);
const char *gw__config_check_revoke_topic(void *field);
const char *gw__config_check_fw_version(void *field);
const char *gw__config_check_fw_url(void *field);

#endif /* GW_CONFIG_INT_H */
