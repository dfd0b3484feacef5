#ifndef MAMFS_CDBUS_SHIM_H
#define MAMFS_CDBUS_SHIM_H
#include <dbus/dbus.h>

/* The type codes and flags are macros with casts Swift does not import: typed constants. */
static const int mamfs_dbus_type_string = DBUS_TYPE_STRING;
static const int mamfs_dbus_type_uint32 = DBUS_TYPE_UINT32;
static const int mamfs_dbus_type_int32 = DBUS_TYPE_INT32;
static const int mamfs_dbus_type_boolean = DBUS_TYPE_BOOLEAN;
static const int mamfs_dbus_type_object_path = DBUS_TYPE_OBJECT_PATH;
static const int mamfs_dbus_type_struct = DBUS_TYPE_STRUCT;
static const int mamfs_dbus_type_array = DBUS_TYPE_ARRAY;
static const int mamfs_dbus_type_variant = DBUS_TYPE_VARIANT;
static const int mamfs_dbus_type_dict_entry = DBUS_TYPE_DICT_ENTRY;
static const int mamfs_dbus_message_type_method_call = DBUS_MESSAGE_TYPE_METHOD_CALL;
static const int mamfs_dbus_message_type_method_return = DBUS_MESSAGE_TYPE_METHOD_RETURN;
static const int mamfs_dbus_message_type_error = DBUS_MESSAGE_TYPE_ERROR;
static const int mamfs_dbus_message_type_signal = DBUS_MESSAGE_TYPE_SIGNAL;
static const int mamfs_dbus_request_name_reply_primary_owner = DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER;
static const int mamfs_dbus_request_name_reply_already_owner = DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER;
static const int mamfs_dbus_request_name_reply_in_queue = DBUS_REQUEST_NAME_REPLY_IN_QUEUE;

/* dbus_message_iter_append_basic takes the address of the value: one typed wrapper per kind. */
static inline dbus_bool_t mamfs_dbus_append_string(DBusMessageIter *iter, const char *value) {
    return dbus_message_iter_append_basic(iter, DBUS_TYPE_STRING, &value);
}
static inline dbus_bool_t mamfs_dbus_append_uint32(DBusMessageIter *iter, dbus_uint32_t value) {
    return dbus_message_iter_append_basic(iter, DBUS_TYPE_UINT32, &value);
}
static inline dbus_bool_t mamfs_dbus_append_int32(DBusMessageIter *iter, dbus_int32_t value) {
    return dbus_message_iter_append_basic(iter, DBUS_TYPE_INT32, &value);
}
/* libdbus aborts on a boolean other than 0 or 1 and on a malformed object path: callers pass
   0/1 and check the path with dbus_validate_path first. */
static inline dbus_bool_t mamfs_dbus_append_boolean(DBusMessageIter *iter, dbus_bool_t value) {
    return dbus_message_iter_append_basic(iter, DBUS_TYPE_BOOLEAN, &value);
}
static inline dbus_bool_t mamfs_dbus_append_object_path(DBusMessageIter *iter, const char *value) {
    return dbus_message_iter_append_basic(iter, DBUS_TYPE_OBJECT_PATH, &value);
}
/* The reading side: the current argument of an iterator, of a known basic type (an object
   path is read with mamfs_dbus_get_string: both are a const char * into the message). */
static inline const char *mamfs_dbus_get_string(DBusMessageIter *iter) {
    const char *value = 0;
    dbus_message_iter_get_basic(iter, &value);
    return value;
}
static inline dbus_uint32_t mamfs_dbus_get_uint32(DBusMessageIter *iter) {
    dbus_uint32_t value = 0;
    dbus_message_iter_get_basic(iter, &value);
    return value;
}
static inline dbus_int32_t mamfs_dbus_get_int32(DBusMessageIter *iter) {
    dbus_int32_t value = 0;
    dbus_message_iter_get_basic(iter, &value);
    return value;
}
static inline dbus_bool_t mamfs_dbus_get_boolean(DBusMessageIter *iter) {
    dbus_bool_t value = 0;
    dbus_message_iter_get_basic(iter, &value);
    return value;
}
#endif
