"""Building blocks of the adapters: the HSM bank (:mod:`.hsm`), the reliable memories (:mod:`.memory`), loss terms
(:mod:`.losses`), SAM (:mod:`.sam`), entropy helpers and the entropy baselines' base (:mod:`.entropy`), the post-hoc
refiners QB-Norm and DSL (:mod:`.posthoc`), the option idiom (:mod:`.options`) and profiling (:mod:`.profiling`)."""
