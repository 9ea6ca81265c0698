"""Exceptions raised by numba_vulkan.

Every error the package raises on purpose derives from :class:`VulkanError`,
so a caller can catch them all with one clause.
"""


class VulkanError(Exception):
    """Root of every numba_vulkan error."""


class CompilerError(VulkanError):
    """A kernel could not be compiled to SPIR-V.

    Attributes:
        kernel: Name of the kernel being compiled, or None.
        stage: Name of the compiler stage that failed (see
            ``numba_vulkan.compiler.stages``), or None.
    """

    def __init__(self, message, kernel=None):
        super().__init__(message)
        self.kernel = kernel
        self.stage = None


class KernelTypeError(CompilerError, TypeError):
    """A kernel passes an atomic a value of a type it does not take (a float
    index, ...): a ``TypeError`` too, as numba.cuda's is."""


class UnsupportedError(CompilerError):
    """The kernel uses a construct the Vulkan target cannot express."""


class ToolError(VulkanError):
    """An external tool or the LLVM backend child failed.

    Attributes:
        tool: Name of the tool.
        returncode: Its exit status (negative for a signal).
        stderr: What it printed on standard error.
        reproduce: A shell command that reproduces the failure.
    """

    def __init__(self, tool, returncode, stderr, reproduce=None):
        self.tool = tool
        self.returncode = returncode
        self.stderr = stderr
        self.reproduce = reproduce
        message = f"{tool} failed (exit status {returncode})"
        if stderr:
            message += ":\n" + stderr.rstrip()
        if reproduce:
            message += f"\nTo reproduce: {reproduce}"
        super().__init__(message)


class ValidationError(ToolError):
    """spirv-val rejected a generated module."""


class DriverError(VulkanError):
    """The Vulkan loader or driver is missing or a Vulkan call failed.

    Attributes:
        result: The VkResult code, or None when no call was made.
    """

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class NotReportedError(DriverError):
    """The device does not report what was asked, such as a statistic of
    the code its driver compiled a kernel into."""


class LaunchError(VulkanError, ValueError):
    """A launch configuration or an argument cannot be used."""


class ConfigError(VulkanError, ValueError):
    """A ``NUMBA_VULKAN_*`` setting has a value it cannot have; the message
    names the variable and what it accepts."""


class AOTError(VulkanError):
    """An ahead-of-time build, directory or lookup failed.

    Raised at run time in strict mode (``NUMBA_VULKAN_AOT_STRICT=1``) when a
    kernel is in no AOT directory, and by builds whose kernels fail.
    """


class ManifestError(AOTError):
    """A manifest or an AOT command line is wrong.

    Attributes:
        path: The manifest file (as the user named it), or None.
        line: The 1-based line of the problem, or None.
        problem: What is wrong, without the location.
    """

    def __init__(self, problem, path=None, line=None):
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if path is not None and line is not None else path
        super().__init__(f"{where}: {problem}" if where else problem)


class AOTWarning(UserWarning):
    """A kernel missing from every AOT directory, or an AOT entry that was rejected."""


class CacheWarning(UserWarning):
    """The cache directory cannot be created or written; caching is off in this process."""


class NarrowingWarning(UserWarning):
    """A kernel was compiled with float64 or int64 narrowed to 32 bits, for a
    device without them."""
