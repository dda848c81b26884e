"""Tests of sciml.ssm (a package, so that module names such as `test_bad_input` may repeat across test folders)."""
