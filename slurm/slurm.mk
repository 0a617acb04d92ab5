# Slurm targets (included by the Makefile).
PROFILE = slurm/$(CLUSTER).toml
SUBMIT_ARGS ?=

.PHONY: submit status testcluster-start testcluster-stop

submit: setup  ## submit STUDY's missing cells as Slurm job arrays with the profile slurm/$(CLUSTER).toml (TUNE=1: one tune job)
	$(PY) -m loaderbench submit "$(STUDY)" --cluster "$(PROFILE)" $(if $(filter command line environment,$(origin RESULTS)),--results "$(RESULTS)") $(if $(TUNE),--tune $(TUNE_ARGS)) $(SUBMIT_ARGS)

status: setup  ## per study: done / running / pending / failed cells on Slurm, with job ids
	$(PY) -m loaderbench status --cluster "$(PROFILE)" $(if $(filter command line environment,$(origin RESULTS)),--results "$(RESULTS)")

testcluster-start:  ## install (if missing) and start the test Slurm cluster (NODES=2: two nodes, for CLUSTER=test2)
	bash slurm/testcluster/install.sh && SLURM_TESTCLUSTER_NODES=$(or $(NODES),1) bash slurm/testcluster/start.sh

testcluster-stop:
	bash slurm/testcluster/stop.sh
