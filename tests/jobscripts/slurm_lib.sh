# Shared by the Slurm tests (source it after test_lib.sh, with SLURM_CONF set):
# job_end JOB prints the state and exit code of a job ("COMPLETED 0:0") once it has ended,
# polling scontrol every 0.5 s for at most 2 minutes.
job_end() {
  local state
  for _ in $(seq 1 240); do
    state=$(scontrol show job "$1" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p')
    case $state in PENDING | RUNNING | CONFIGURING | COMPLETING | "") sleep 0.5 ;; *) break ;; esac
  done
  echo "$state $(scontrol show job "$1" | sed -nE 's/.* ExitCode=([0-9:]+).*/\1/p')"
}
