# `cmake --install build/release --prefix P` lays strata out as HPC software is laid out:
#   P/bin/strata                          the executable
#   P/share/strata/{inputs,jobscripts,machines,tools}
#                                         example decks, job scripts, machine files (the
#                                         planner's default), the Python tools (with the
#                                         PyTorch GPT that ckpt_to_torch.py imports beside them)
#   P/share/doc/strata                    README and docs/
#   P/share/modulefiles/strata/VERSION    an environment module (Tcl: environment-modules,
#                                         Lmod) that puts strata on PATH and names the rest
# tests/scripts/test_install.sh installs into a temporary prefix, loads the module and
# trains the default deck from the installed tree.
install(TARGETS strata RUNTIME DESTINATION bin)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/inputs/ DESTINATION share/strata/inputs)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/machines/ DESTINATION share/strata/machines)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/jobscripts/ DESTINATION share/strata/jobscripts USE_SOURCE_PERMISSIONS)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/ckpt_to_torch.py ${PROJECT_SOURCE_DIR}/tools/plot_metrics.py
                 ${PROJECT_SOURCE_DIR}/tools/plot_trace.py
        DESTINATION share/strata/tools)
install(FILES ${PROJECT_SOURCE_DIR}/tools/strata_data.py ${PROJECT_SOURCE_DIR}/bench/peers/torch_gpt.py
        DESTINATION share/strata/tools)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/strata)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION share/doc/strata/docs)
# the module file names the prefix it is installed under, known only at install time
install(CODE "
  set(STRATA_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(STRATA_VERSION \"${PROJECT_VERSION}\")
  file(STRINGS \"${CMAKE_BINARY_DIR}/app/generated/strata_version.hpp\" commit_line REGEX \"STRATA_GIT_COMMIT\")
  string(REGEX REPLACE \".*\\\"(.*)\\\".*\" \"\\\\1\" STRATA_COMMIT \"\${commit_line}\")
  set(module \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/share/modulefiles/strata/${PROJECT_VERSION}\")
  message(STATUS \"Installing: \${module}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/strata.module.in\" \"\${module}\" @ONLY)
")
