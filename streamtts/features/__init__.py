"""Product features, one package each: its watcher, its logic and its glue (the contracts
stay in `streamtts.schemas`). Above the runtime, below the stages and clients: a stage may
import a feature, a feature never imports a stage, and features do not import each other."""
