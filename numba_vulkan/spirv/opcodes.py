"""The numbers of the SPIR-V specification that the package reads or writes,
under the specification's own names.

An opcode is ``Op<Name>``; an enumerant is its operand kind's name followed
by its own, as in the specification's C header without the ``Spv`` prefix
and ``Mask`` suffix: ``DecorationBinding``, ``CapabilityInt8``,
``StorageClassStorageBuffer``, ``MemorySemanticsAcquireRelease``. Only
what some module uses is here; every pass, check and test takes its numbers
from this table.
"""

# Opcodes (the low 16 bits of an instruction's first word) ---------------------

OpSourceContinued = 2
OpSource = 3
OpSourceExtension = 4
OpName = 5
OpMemberName = 6
OpString = 7
OpLine = 8
OpExtension = 10
OpExtInstImport = 11
OpMemoryModel = 14
OpEntryPoint = 15
OpExecutionMode = 16
OpCapability = 17
OpTypeVoid = 19
OpTypeBool = 20
OpTypeInt = 21
OpTypeFloat = 22
OpTypeVector = 23
OpTypeArray = 28
OpTypeRuntimeArray = 29
OpTypeStruct = 30
OpTypePointer = 32
OpTypeForwardPointer = 39
OpConstantTrue = 41
OpConstantFalse = 42
OpConstant = 43
OpConstantComposite = 44
OpConstantSampler = 45
OpConstantNull = 46
OpSpecConstantTrue = 48
OpSpecConstantFalse = 49
OpSpecConstant = 50
OpSpecConstantComposite = 51
OpSpecConstantOp = 52
OpFunction = 54
OpFunctionEnd = 56
OpFunctionCall = 57
OpVariable = 59
OpLoad = 61
OpStore = 62
OpCopyMemory = 63
OpCopyMemorySized = 64
OpAccessChain = 65
OpInBoundsAccessChain = 66
OpPtrAccessChain = 67
OpInBoundsPtrAccessChain = 70
OpDecorate = 71
OpMemberDecorate = 72
OpCompositeInsert = 82
OpCopyObject = 83
OpBitcast = 124
OpFNegate = 127
OpFAdd = 129
OpFSub = 131
OpFMul = 133
OpUDiv = 134
OpSDiv = 135
OpFDiv = 136
OpUMod = 137
OpSRem = 138
OpSMod = 139
OpFRem = 140
OpFMod = 141
OpVectorTimesScalar = 142
OpDot = 148
OpSelect = 169
OpBitReverse = 204
OpBitCount = 205
OpControlBarrier = 224
OpMemoryBarrier = 225
OpAtomicStore = 228
OpAtomicExchange = 229
OpAtomicCompareExchange = 230
OpAtomicIAdd = 234
OpAtomicISub = 235
OpAtomicSMin = 236
OpAtomicUMin = 237
OpAtomicSMax = 238
OpAtomicUMax = 239
OpAtomicAnd = 240
OpAtomicOr = 241
OpAtomicXor = 242
OpPhi = 245
OpSelectionMerge = 247
OpLabel = 248
OpSwitch = 251
OpNoLine = 317
OpAtomicFlagTestAndSet = 318
OpModuleProcessed = 330
OpExecutionModeId = 331
OpGroupNonUniformElect = 333
OpGroupNonUniformAll = 334
OpGroupNonUniformAny = 335
OpGroupNonUniformAllEqual = 336
OpGroupNonUniformBroadcast = 337
OpGroupNonUniformBallot = 339
OpGroupNonUniformShuffle = 345
OpGroupNonUniformShuffleXor = 346
OpGroupNonUniformShuffleUp = 347
OpGroupNonUniformShuffleDown = 348
OpGroupNonUniformIAdd = 349
OpGroupNonUniformFAdd = 350
OpGroupNonUniformSMin = 353
OpGroupNonUniformUMin = 354
OpGroupNonUniformFMin = 355
OpGroupNonUniformSMax = 356
OpGroupNonUniformUMax = 357
OpGroupNonUniformFMax = 358
OpGroupNonUniformBitwiseAnd = 359
OpGroupNonUniformBitwiseOr = 360
OpGroupNonUniformBitwiseXor = 361
OpGroupNonUniformQuadSwap = 366
OpAtomicFMinEXT = 5614
OpAtomicFMaxEXT = 5615
OpAtomicFAddEXT = 6035

# Capabilities -----------------------------------------------------------------

CapabilityShader = 1
CapabilityLinkage = 5
CapabilityFloat16 = 9
CapabilityFloat64 = 10
CapabilityInt64 = 11
CapabilityInt64Atomics = 12
CapabilityInt16 = 22
CapabilityInt8 = 39
CapabilityGroupNonUniform = 61
CapabilityGroupNonUniformVote = 62
CapabilityGroupNonUniformArithmetic = 63
CapabilityGroupNonUniformBallot = 64
CapabilityGroupNonUniformShuffle = 65
CapabilityGroupNonUniformShuffleRelative = 66
CapabilityStorageBuffer16BitAccess = 4433
CapabilityUniformAndStorageBuffer16BitAccess = 4434
CapabilityStoragePushConstant16 = 4435
CapabilityVariablePointersStorageBuffer = 4441
CapabilityVariablePointers = 4442
CapabilityStorageBuffer8BitAccess = 4448
CapabilityUniformAndStorageBuffer8BitAccess = 4449
CapabilityStoragePushConstant8 = 4450
CapabilityDenormPreserve = 4464
CapabilityDenormFlushToZero = 4465
CapabilitySignedZeroInfNanPreserve = 4466
CapabilityRoundingModeRTE = 4467
CapabilityAtomicFloat32MinMaxEXT = 5612
CapabilityAtomicFloat32AddEXT = 6033
CapabilityAtomicFloat64AddEXT = 6034

# Other operand kinds ----------------------------------------------------------

ExecutionModelGLCompute = 5

ExecutionModeLocalSize = 17
ExecutionModeLocalSizeId = 38
ExecutionModeSignedZeroInfNanPreserve = 4461
ExecutionModeRoundingModeRTE = 4462

StorageClassInput = 1
StorageClassWorkgroup = 4
StorageClassPrivate = 6
StorageClassFunction = 7
StorageClassPushConstant = 9
StorageClassStorageBuffer = 12

DecorationBuiltIn = 11
DecorationNonWritable = 24
DecorationBinding = 33
DecorationDescriptorSet = 34
DecorationOffset = 35
DecorationLinkageAttributes = 41
DecorationNoContraction = 42

BuiltInWorkgroupSize = 25

LinkageTypeImport = 1

ScopeWorkgroup = 2
ScopeSubgroup = 3

GroupOperationReduce = 0
GroupOperationInclusiveScan = 1
GroupOperationExclusiveScan = 2

MemorySemanticsAcquireRelease = 0x8
MemorySemanticsUniformMemory = 0x40
MemorySemanticsSubgroupMemory = 0x80
MemorySemanticsWorkgroupMemory = 0x100
MemorySemanticsCrossWorkgroupMemory = 0x200
MemorySemanticsAtomicCounterMemory = 0x400
MemorySemanticsImageMemory = 0x800

#: Each capability above by number, named without its prefix (``"Int8"``):
#: how compiled kernels and messages list a module's capabilities.
CAPABILITIES = {value: name[len("Capability"):] for name, value in list(globals().items())
                if name.startswith("Capability")}
