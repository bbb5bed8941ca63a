/* Private to src/server: the steps of ul_server_init that fill the api from the
 * configuration (setup.c). Each returns 0 or a negative UL_E* with sv->err set (and
 * sv->bad_config when the configuration's values are at fault). */
#ifndef UL_SERVER_SETUP_H
#define UL_SERVER_SETUP_H

#include "server/server.h"

/* The served model's id: the model file's base name, or "null". */
const char *ul_server_model_id(const ul_server_t *sv);
int ul_server_setup_api(ul_server_t *sv);
int ul_server_setup_chat(ul_server_t *sv);
int ul_server_setup_keys(ul_server_t *sv);

#endif
