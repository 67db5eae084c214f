# SPDX-License-Identifier: MIT
# The portable layer's one CMake function (docs/architecture.md, "The portable layer").
# Included by the host build (CMakeLists.txt) and by the cross-compiled firmware sub-build
# (firmware/CMakeLists.txt): the same call in a folder's CMakeLists.txt builds the library
# for the host and for the cores.
#
# npu_portable_library(NAME [HEADER_ONLY] [FP_STRICT] [SOURCES src/a.c ...] [DEPS lib ...])
#   A library whose folder is the current source dir: it exports exactly <folder>/include
#   and compiles only sources under <folder> (src/). DEPS are other libraries (portable ones,
#   or npu_regs for the generated register headers), linked PUBLIC. FP_STRICT: no fused
#   multiply-adds, because the host and the cores must compute the same bits (weights,
#   routing). On the cores the library is built against newlib (npu_libc).
#
# npu_host_library(NAME SOURCES ... [DEPS ...]): the same layout, for the host build only
#   (a call in the firmware sub-build does nothing).

set(NPU_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes)

function(npu__library_checks name sources)
  foreach(src IN LISTS sources)
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(RELATIVE_PATH rel ${CMAKE_CURRENT_SOURCE_DIR} ${abs})
    if(rel MATCHES "^\\.\\./")
      message(FATAL_ERROR "${name}: source ${src} is outside ${CMAKE_CURRENT_SOURCE_DIR}; "
                          "link the library that owns it instead")
    endif()
  endforeach()
  if(NOT IS_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include)
    message(FATAL_ERROR "${name}: ${CMAKE_CURRENT_SOURCE_DIR}/include does not exist")
  endif()
endfunction()

function(npu_portable_library name)
  cmake_parse_arguments(L "HEADER_ONLY;FP_STRICT" "" "SOURCES;DEPS" ${ARGN})
  npu__library_checks(${name} "${L_SOURCES}")
  set(inc ${CMAKE_CURRENT_SOURCE_DIR}/include)
  if(L_HEADER_ONLY)
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${inc})
    target_link_libraries(${name} INTERFACE ${L_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${L_SOURCES})
  target_include_directories(${name} PUBLIC ${inc})
  target_link_libraries(${name} PUBLIC ${L_DEPS})
  target_compile_options(${name} PRIVATE ${NPU_WARNINGS})
  if(L_FP_STRICT)
    target_compile_options(${name} PRIVATE -ffp-contract=off)
  endif()
  if(CMAKE_CROSSCOMPILING)
    target_link_libraries(${name} PUBLIC npu_libc)
  else()
    target_link_libraries(${name} PUBLIC m)
  endif()
endfunction()

function(npu_host_library name)
  if(CMAKE_CROSSCOMPILING)
    return()
  endif()
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
  npu__library_checks(${name} "${L_SOURCES}")
  add_library(${name} STATIC ${L_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${L_DEPS})
  target_compile_options(${name} PRIVATE ${NPU_WARNINGS})
endfunction()

# Writes every library and executable target of this build, with its folder, sources and
# include directories, to ${CMAKE_BINARY_DIR}/npu_targets.json: the input of the include
# rules test (tests/host/include_rules.py). Call once, at the end of the top-level file.
function(npu_write_target_manifest)
  set(targets "")
  set(dirs ${CMAKE_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs d)
    get_property(t DIRECTORY ${d} PROPERTY BUILDSYSTEM_TARGETS)
    list(APPEND targets ${t})
    get_property(sub DIRECTORY ${d} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${sub})
  endwhile()
  set(json "[\n")
  set(sep "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "LIBRARY|EXECUTABLE")
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    set(props "")
    foreach(p SOURCES INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES)
      if(type STREQUAL "INTERFACE_LIBRARY" AND NOT p STREQUAL "INTERFACE_INCLUDE_DIRECTORIES")
        set(v "")
      else()
        get_target_property(v ${t} ${p})
        if(NOT v)
          set(v "")
        endif()
      endif()
      set(items "")
      set(isep "")
      foreach(x IN LISTS v)
        string(APPEND items "${isep}\"${x}\"")
        set(isep ", ")
      endforeach()
      string(APPEND props ", \"${p}\": [${items}]")
    endforeach()
    string(APPEND json "${sep}  {\"name\": \"${t}\", \"type\": \"${type}\", \"dir\": \"${dir}\"${props}}")
    set(sep ",\n")
  endforeach()
  string(APPEND json "\n]\n")
  file(WRITE ${CMAKE_BINARY_DIR}/npu_targets.json "${json}")
endfunction()
