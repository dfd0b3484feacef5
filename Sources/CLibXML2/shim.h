#ifndef MAMFS_CLIBXML2_SHIM_H
#define MAMFS_CLIBXML2_SHIM_H
#include <libxml/parser.h>
#include <libxml/tree.h>
#endif
