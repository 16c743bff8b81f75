# The layering of docs/architecture.md, checked on every build:
#   cmake -DROOT=<tree> -P cmake/check_layering.cmake
# A module (baton/<module>/) includes only itself and the modules before it
# in BATON_MODULES, and nothing before the torch line includes LibTorch
# (<torch/...>, <ATen/...>, <c10/...>). Fails naming each file, line and rule
# broken. tests/cli/layering_wrong_way_include_fails.sh proves it fails on a
# wrong-way include.
#
# Decision: enforced by this check rather than by per-module include paths,
# because every include names its module from the repository root
# ("baton/nn/linear.h"), so one include root serves every module.
set(BATON_MODULES core schedule topology trace sim partition plan
                  comm nn runtime data pipeline train)
set(BATON_TORCH_FREE core schedule topology trace sim partition plan)
# Units of torch modules that the fuzzers build without LibTorch
# (CMakeLists.txt: BATON_TORCH_FREE_UNITS):
# nothing they include, followed through every "baton/..." header, may
# include LibTorch.
set(BATON_TORCH_FREE_FILES baton/pipeline/manifest.cpp baton/data/idx.cpp
                           baton/data/token_span.cpp baton/data/indexed_dataset.cpp
                           baton/data/indexed_dataset_builder.cpp baton/data/token_dataset.cpp
                           baton/data/samples.cpp baton/data/tokenizer.cpp
                           baton/data/text_documents.cpp baton/data/prepare.cpp
                           baton/data/sentencepiece.cpp baton/data/sentencepiece_none.cpp
                           baton/train/config.cpp baton/train/toml_characters.cpp
                           baton/train/options.cpp baton/train/plan_config.cpp)
if(NOT ROOT)
  message(FATAL_ERROR "check_layering: pass -DROOT=<source tree>")
endif()
set(problems "")
list(LENGTH BATON_MODULES count)
math(EXPR last "${count} - 1")
foreach(index RANGE ${last})
  list(GET BATON_MODULES ${index} module)
  list(SUBLIST BATON_MODULES 0 ${index} below)
  list(APPEND below ${module})
  list(FIND BATON_TORCH_FREE ${module} torch_free)
  file(GLOB sources "${ROOT}/baton/${module}/*.h" "${ROOT}/baton/${module}/*.cpp")
  foreach(source ${sources})
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    file(RELATIVE_PATH name "${ROOT}" "${source}")
    foreach(line ${includes})
      if(line MATCHES "#[ \t]*include[ \t]*[<\"]baton/([A-Za-z0-9_]+)/")
        set(used ${CMAKE_MATCH_1})
        list(FIND below ${used} found)
        if(found EQUAL -1)
          string(APPEND problems "\n  ${name}: ${line} (module ${module} may not include ${used})")
        endif()
      endif()
      if(torch_free GREATER -1 AND line MATCHES "#[ \t]*include[ \t]*<(torch|ATen|c10)/")
        string(APPEND problems "\n  ${name}: ${line} (module ${module} is above the torch line)")
      endif()
    endforeach()
  endforeach()
endforeach()
# Files built without LibTorch besides those units: the torch-free modules'
# tests, the torch-free units' tests, the CLI outside tools/torch/ (`baton`
# links no LibTorch; baton-train does) and the fuzzers. Followed through
# every "baton/...", <baton/...> and "tools/..." header like the units.
file(GLOB torch_free_consumers "${ROOT}/tools/*.cpp" "${ROOT}/tools/no_torch/*.cpp"
     "${ROOT}/tools/front/*.cpp" "${ROOT}/tools/data/*.cpp" "${ROOT}/fuzz/*.cpp")
foreach(module ${BATON_TORCH_FREE})
  file(GLOB tests "${ROOT}/tests/${module}/*.cpp")
  list(APPEND torch_free_consumers ${tests})
endforeach()
foreach(unit indexed_dataset indexed_dataset_refusals token_dataset samples text_documents prepare)
  list(APPEND torch_free_consumers "${ROOT}/tests/data/${unit}_test.cpp")
endforeach()
set(torch_free_roots ${BATON_TORCH_FREE_FILES})
foreach(consumer ${torch_free_consumers})
  file(RELATIVE_PATH name "${ROOT}" "${consumer}")
  list(APPEND torch_free_roots ${name})
endforeach()
# walk_includes(<root> <forbidden regex> <why>): follows <root>'s "baton/...",
# <baton/...>, "tools/..." and "fuzz/..." includes through the tree and
# appends a problem for each include line matching <forbidden> it reaches.
function(walk_includes root forbidden why)
  set(queue ${root})
  set(seen ${root})
  set(found "")
  while(queue)
    list(POP_FRONT queue file)
    if(NOT EXISTS "${ROOT}/${file}")
      continue()
    endif()
    file(STRINGS "${ROOT}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line ${includes})
      if(line MATCHES "${forbidden}")
        string(APPEND found "\n  ${file}: ${line} (${why})")
      elseif(line MATCHES "#[ \t]*include[ \t]*[<\"]((baton|tools|fuzz)/[^\">]+)[\">]")
        set(next ${CMAKE_MATCH_1})
        list(FIND seen ${next} known)
        if(known EQUAL -1)
          list(APPEND seen ${next})
          list(APPEND queue ${next})
        endif()
      endif()
    endforeach()
  endwhile()
  set(problems "${problems}${found}" PARENT_SCOPE)
endfunction()
foreach(unit ${torch_free_roots})
  walk_includes(${unit} "#[ \t]*include[ \t]*<(torch|ATen|c10)/"
                "reached from ${unit}, which builds without LibTorch")
endforeach()
# The public surface: baton.h reaches the Pipeline and its value types, never the executor.
walk_includes(baton/baton.h "#[ \t]*include[ \t]*[<\"]baton/runtime/executor\\.h[\">]"
              "baton.h reaches the executor; include baton/runtime/step_result.h")
if(problems)
  message(FATAL_ERROR "[layering] includes against docs/architecture.md's module order:${problems}")
endif()
