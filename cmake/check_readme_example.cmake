# cmake/check_readme_example.cmake — run by ctest: the README's C++ example must be the text of
# examples/readme_example.cpp from its first #include on, so the README shows code that compiles.
file(READ ${README} readme)
file(READ ${EXAMPLE} example)
string(FIND "${example}" "#include" start)
string(SUBSTRING "${example}" ${start} -1 body)
string(FIND "${readme}" "${body}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/readme_example.cpp (from its first #include) verbatim")
endif()
