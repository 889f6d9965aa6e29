# SIMULATED mock Atlas node: the Ascend driver tools directory on PATH for login shells (like a driver install).
case ":$PATH:" in
    *:/usr/local/Ascend/driver/tools:*) ;;
    *) PATH="$PATH:/usr/local/Ascend/driver/tools"; export PATH ;;
esac
