// node 20.20's v8dbg_ constants (nm -D /usr/bin/node) that ember reads:
// V8's layout for the unit tests and the fuzz target of its frame reader.
#pragma once

#include <cstdint>
#include <map>
#include <string>

inline const std::map<std::string, int64_t> kNode20 = {
    {"TaggedSize", 8},
    {"off_fp_function", -16},
    {"off_fp_context_or_frame_type", -8},
    {"class_JSFunction__shared__SharedFunctionInfo", 24},
    {"class_HeapObject__map__Map", 0},
    {"class_Map__instance_type__uint16_t", 12},
    {"type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", 262},
    {"class_SharedFunctionInfo__name_or_scope_info__Object", 16},
    {"class_SharedFunctionInfo__script_or_debug_info__HeapObject", 32},
    {"class_Script__name__Object", 16},
    {"class_String__length__int32_t", 12},
    {"class_SeqOneByteString__chars__char", 16},
    {"class_SeqTwoByteString__chars__char", 16},
    {"class_ConsString__first__String", 16},
    {"class_ConsString__second__String", 24},
    {"class_ThinString__actual__String", 16},
    {"class_SlicedString__parent__String", 16},
    {"class_SlicedString__offset__SMI", 24},
    {"FirstNonstringType", 128},
    {"StringRepresentationMask", 7},
    {"ConsStringTag", 1},
    {"SlicedStringTag", 3},
    {"ThinStringTag", 5},
    {"StringEncodingMask", 8},
    {"OneByteStringTag", 8},
    {"type_ScopeInfo__SCOPE_INFO_TYPE", 261},
    {"type_Script__SCRIPT_TYPE", 167},
    {"scopeinfo_idx_ncontextlocals", 2},
    {"scopeinfo_idx_first_vars", 3},
    {"SmiShiftSize", 31},
};
