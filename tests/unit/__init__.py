"""Tests of one part of gpuplan each: unit/<package>/ mirrors gpuplan/<package>/ (providers/ and jobs/ mirror the
top-level folders installed as gpuplan.providers and gpuplan.jobs); tests of gpuplan's loose modules sit here."""
