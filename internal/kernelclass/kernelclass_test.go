// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kernelclass

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want string
	}{
		{"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", CategoryCommunication},
		{"void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", CategoryCommunication},
		{"fused_moe_kernel", CategoryMoE},
		{"void vllm::moe::topkGatingSoftmax<8, 64, 4, 16, int>(float const*, bool const*, float*, int, int*, int*, int, int, int)", CategoryMoE},
		{"void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)", CategoryKVCache},
		{"void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, false, 512>(...)", CategoryAttentionDecode},
		{"void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>>(flash::Flash_fwd_params)", CategoryAttentionDecode},
		{"void flashinfer::BatchPrefillWithPagedKVCacheKernel<...>(...)", CategoryAttentionPrefill},
		{"void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(flash::Flash_fwd_params)", CategoryAttention},
		{"void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)", CategoryNormalization},
		{"void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float)", CategoryNormalization},
		{"void vllm::rotary_embedding_kernel<c10::BFloat16, true>(...)", CategoryRoPE},
		{"void vllm::dynamic_scaled_fp8_quant_kernel<c10::BFloat16>(...)", CategoryQuantization},
		{"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", CategoryGEMM},
		{"ampere_sgemm_128x64_tn", CategoryGEMM},
		{"nvjet_tst_128x256_64x4_1x2_h_bz_coopB_TNT", CategoryGEMM},
		{"void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(...)", CategoryActivation},
		{"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)", CategorySampling},
		{"void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)", CategorySampling},
		{"void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>(int, ...)", CategoryMemory},
		{"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", CategoryOther},
	}
	for _, tt := range tests {
		t.Run(tt.want+"/"+Shorten(tt.name), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Default.Classify(tt.name))
		})
	}
}

func TestUserRulesComeFirst(t *testing.T) {
	t.Parallel()
	tbl, err := New([]Rule{{Category: "my_fused_block", Pattern: `^my_fused_`}, {Category: CategoryGEMM, Pattern: `ampere_`}})
	require.NoError(t, err)
	assert.Equal(t, "my_fused_block", tbl.Classify("my_fused_attention_kernel"))
	assert.Equal(t, CategoryGEMM, tbl.Classify("ampere_fp16_attention"))
	assert.Equal(t, CategoryRoPE, tbl.Classify("rotary_kernel"))
}

func TestNewRejectsBadRules(t *testing.T) {
	t.Parallel()
	_, err := New([]Rule{{Category: "x", Pattern: "("}})
	require.ErrorContains(t, err, "kernel category rule 0 (x)")
	_, err = New([]Rule{{Pattern: "x"}})
	require.ErrorContains(t, err, "empty category")
}

func TestShorten(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::templates::cuda::uniform_and_transform<float>(at::TensorIteratorBase&)::{lambda()#1}>(at::TensorIteratorBase&, at::CUDAGeneratorImpl*)", "at::native::distribution_elementwise_grid_stride_kernel"},
		{"void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float)", "cudnn::bn_bw_1C11_kernel_new"},
		{"triton_poi_fused_add_cos_sin_0", "triton_poi_fused_add_cos_sin"},
		{"ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"},
		{"_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128EEEEvNS_16Flash_fwd_paramsE", "flash::flash_fwd_kernel"},
		{"_ZN4vllm15rms_norm_kernelIN3c108BFloat16ELi8EEEvPT_PKS3_S6_fii", "vllm::rms_norm_kernel"},
		{"_ZN2at6native12_GLOBAL__N_120softmax_warp_forwardIfEEvv", "at::native::softmax_warp_forward"},
		{"_Z15my_plain_kernelPf", "my_plain_kernel"},
		{"_Z", "_Z"},
		{"a::b::c::d::e_kernel(int)", "c::d::e_kernel"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Shorten(tt.in), tt.in)
	}
}

func FuzzShorten(f *testing.F) {
	f.Add("_ZN5flash13flash_fwd_kernelIEEvv")
	f.Add("void a::b<c<d>>(e)")
	f.Add("_ZN999999999x")
	f.Fuzz(func(t *testing.T, s string) {
		out := Shorten(s)
		if len(out) > MaxShortLen && len(s) > 0 {
			t.Fatalf("Shorten(%q) = %d bytes", s, len(out))
		}
		_ = Default.Classify(s)
	})
}
